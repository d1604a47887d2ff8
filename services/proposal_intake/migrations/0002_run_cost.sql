-- What a run's accepted calls cost so far, in the currency of its cost budget.
ALTER TABLE runs ADD COLUMN cost_spent_minor bigint NOT NULL DEFAULT 0;
