-- A run stops dispatching either to undo what it did (a step failed: its done steps are
-- compensated) or because it ran out of budget or time (what it did stands; nothing is undone
-- unless the run or an operator asks for it).
ALTER TABLE runs ADD COLUMN compensates boolean NOT NULL DEFAULT true;
