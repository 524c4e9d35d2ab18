//! Schedules in process: the views of stored schedules and fires, and the options a
//! [`ScheduleInput`] gives.

use ratchet_core::Timestamp;
use ratchet_runtime::{CatchUp, Error, Overlap, ScheduleDescription, ScheduleOptions};
use ratchet_store::{FireRecord, ScheduleAction, ScheduleRecord};
use serde_json::Value;

use super::{invalid, problem};
use crate::problem::{ApiError, ProblemBody};
use crate::schedules::{DescriptionView, FireView, ScheduleInput, ScheduleView};
use crate::time::{parse_rfc3339, rfc3339};

impl From<&ScheduleRecord> for ScheduleView {
    fn from(s: &ScheduleRecord) -> Self {
        let time = |t: Option<Timestamp>| t.map(rfc3339);
        Self {
            name: s.name.clone(),
            spec: s.spec.clone(),
            time_zone: s.time_zone.clone(),
            action: serde_json::to_value(&s.action).unwrap_or(Value::Null),
            overlap: s.overlap.clone(),
            catch_up: s.catch_up.clone(),
            jitter_ms: s.jitter_ms,
            paused: s.paused,
            note: s.note.clone(),
            start_at: time(s.start_at),
            end_at: time(s.end_at),
            remaining_actions: s.remaining,
            last_tick: time(s.last_tick),
            next_fire_at: time(s.next_fire_at),
            running: s.running.clone(),
            buffered: time(s.buffered),
            missed: s.missed,
            settled_through: time(s.settled_through),
            version: s.version,
            created_at: rfc3339(s.created_at),
            updated_at: rfc3339(s.updated_at),
        }
    }
}

impl FireView {
    /// The view of a fire, with its run's status when known.
    pub fn of(f: &FireRecord, status: Option<String>) -> Self {
        Self {
            tick: rfc3339(f.nominal),
            fired_at: rfc3339(f.actual),
            late_ms: f.actual.as_millis().saturating_sub(f.nominal.as_millis()),
            kind: f.kind.as_str().to_string(),
            run: f.run.clone(),
            skipped: f.skipped.clone(),
            status,
        }
    }
}

impl From<&ScheduleDescription> for DescriptionView {
    fn from(d: &ScheduleDescription) -> Self {
        Self {
            schedule: ScheduleView::from(&d.schedule),
            upcoming: d.upcoming.iter().map(|t| rfc3339(*t)).collect(),
            recent: d
                .recent
                .iter()
                .map(|r| FireView::of(&r.fire, r.status.clone()))
                .collect(),
        }
    }
}

fn time_field(value: Option<&str>, field: &str) -> Result<Option<Timestamp>, ApiError> {
    value.map(|t| invalid(parse_rfc3339(t), field)).transpose()
}

impl ScheduleInput {
    /// The options it gives, or the problem with one of its fields.
    pub fn into_options(self) -> Result<ScheduleOptions, ApiError> {
        let action = match (self.workflow, self.task) {
            (Some(workflow), None) => {
                if self.options.is_some() {
                    return Err(ProblemBody::invalid("options go with a task")
                        .field("options")
                        .into());
                }
                ScheduleAction::Start {
                    workflow,
                    input: self.input,
                }
            }
            (None, Some(task)) => ScheduleAction::Enqueue {
                task,
                input: self.input,
                options: self
                    .options
                    .unwrap_or_default()
                    .into_options()
                    .map_err(|e| {
                        e.refield(|f| {
                            f.map_or_else(|| "options".into(), |f| format!("options.{f}"))
                        })
                    })?,
            },
            _ => {
                return Err(ProblemBody::invalid("give either `workflow` or `task`")
                    .field("workflow")
                    .into())
            }
        };
        let overlap: Overlap = match self.overlap {
            Some(o) => o.parse().map_err(|e| problem(Error::from(e)))?,
            None => Overlap::default(),
        };
        let catch_up: CatchUp = match self.catch_up {
            Some(c) => c.parse().map_err(|e| problem(Error::from(e)))?,
            None => CatchUp::default(),
        };
        Ok(ScheduleOptions {
            spec: self.spec,
            time_zone: self.time_zone.unwrap_or_else(|| "UTC".into()),
            action,
            overlap,
            catch_up,
            jitter_ms: self.jitter_ms.unwrap_or(0),
            paused: self.paused.unwrap_or(false),
            note: self.note,
            start_at: time_field(self.start_at.as_deref(), "start_at")?,
            end_at: time_field(self.end_at.as_deref(), "end_at")?,
            remaining_actions: self.remaining_actions,
        })
    }
}
