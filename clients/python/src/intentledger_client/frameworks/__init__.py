"""The registry's tools as the tools of agent frameworks, each call going through intentledger.

One module per framework, each an extra of the package that pulls the framework in
(``pip install 'intentledger-client[openai-agents]'``, ``[langchain]``, ``[langgraph]``,
``[pydantic-ai]``); importing this package imports none of them:

- ``openai_agents.function_tools``: OpenAI Agents SDK ``FunctionTool``s;
- ``langchain.structured_tools``: LangChain ``StructuredTool``s (for a LangGraph ``ToolNode``
  too), and ``langgraph.interrupt_while_awaiting_approval`` to pause a graph on a call that
  waits for people;
- ``pydantic_ai.toolset``: a Pydantic AI ``FunctionToolset``.

What they share is in ``ledger``: the names, the operation key, what the model reads.
"""
