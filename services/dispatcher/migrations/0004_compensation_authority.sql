-- A compensation waits, unsent, for the policy's answer to the dispatcher's proposal: its
-- capability (in capability) or the policy's refusal, kept here until the call's next step
-- records it as the call's denial.
ALTER TABLE calls ADD COLUMN policy_refusal jsonb;
