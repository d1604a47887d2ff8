-- The facts a run row is derived from besides its calls (aborts, proposals refused whole:
-- RUN_EVENTS in services/projection/repository.py) are read for every batch that touches the
-- run. Through events_by_run that read walked the run's whole history; this index holds only
-- those few events. Its predicate names the event types as the query does, literally.
CREATE INDEX events_run_facts ON events (tenant_id, run_id)
    WHERE event_type IN ('RunAborted', 'ProposalRejected');
