-- A bound on a tool's attempts in flight (the tool registry's max_in_flight): a send beyond it
-- waits here, where no attempt deadline runs, instead of in the downstream's queue, where it
-- would (services/dispatcher/capacity.py). 'waiting': in line for a slot; 'admitted': a slot is
-- kept for it until its next transition. Every transition clears it.
ALTER TABLE calls ADD COLUMN capacity text CHECK (capacity IN ('waiting', 'admitted'));
CREATE INDEX calls_in_line_for_capacity ON calls (tool_name, next_action_at)
    WHERE capacity IS NOT NULL;

-- The attempts not yet answered: a tool's count is read once per batch of steps.
CREATE INDEX attempts_unanswered ON attempts (logical_call_id) WHERE status IS NULL;
