"""proposal-intake: turns what agents publish on ``agent.proposals`` into named intents."""
