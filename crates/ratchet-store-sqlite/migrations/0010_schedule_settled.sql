-- The newest tick whose fire record was dropped: ticks up to it are settled, and no backfill
-- fires them again (a schedule keeps its newest 1,000 fire records).
ALTER TABLE schedules ADD COLUMN settled_through INTEGER;
