//! One operation of each kind the events scenario measures, on random courses and students.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::bail;
use ratchet::{
    AppendCondition, AppendOutcome, Direction, EventAppend, EventQuery, EventRead, EventStore,
    Position, Projector, QueryItem, StoredEvent,
};

use super::dataset::{
    course_tag, student_enrolled, student_registered, student_tag, COURSE_DEFINED,
};
use super::Rng;

/// Events per call of `append-batch`.
pub(crate) const BATCH: u64 = 100;
/// Events per page when an operation reads all of a course's or a student's events.
const PAGE: u32 = 1_000;

/// Which operation. The plain appends register new students, so they leave the dataset's
/// courses and students as loaded for the operations after them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// One new student per call, through `EventStore::append` (concurrent calls are merged).
    Append,
    /// 100 new students per call.
    AppendBatch,
    /// Read where a random course's boundary stands (its newest event, one backward read of
    /// one), then append an enrollment only if none arrived since: the conditional append of
    /// a writer that keeps its state current, e.g. from a subscription.
    AppendIf,
    /// The whole decision: project a random course and student (two projectors, one read of
    /// all their events), then append the enrollment under the condition the projection
    /// returned.
    Decide,
    /// A conditional append whose condition is already violated: always a conflict.
    AppendIfConflict,
    /// Read every event of a random student.
    ReadTag,
    /// Read the first 100 `CourseDefined` after a random position.
    ReadType,
    /// Project a random course and a random student (two projectors, one read).
    Project,
}

impl Op {
    /// Every operation, reads first: they see the dataset as loaded, before `append-if` adds
    /// enrollments to its courses and students.
    pub(crate) const ALL: [Op; 8] = [
        Op::ReadTag,
        Op::ReadType,
        Op::Project,
        // Before the cheap conditional appends: they would grow the courses it reads.
        Op::Decide,
        Op::AppendIfConflict,
        Op::AppendIf,
        Op::Append,
        Op::AppendBatch,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Append => "append",
            Op::AppendBatch => "append-batch",
            Op::AppendIf => "append-if",
            Op::AppendIfConflict => "append-if-conflict",
            Op::Decide => "decide",
            Op::ReadTag => "read-tag",
            Op::ReadType => "read-type",
            Op::Project => "project",
        }
    }
}

/// What the operations work on.
pub(crate) struct Scene {
    pub(crate) events: EventStore,
    pub(crate) courses: u64,
    pub(crate) students: u64,
    /// Each course's `CourseDefined`.
    pub(crate) course_positions: Arc<Vec<Position>>,
    /// The last position of the loaded dataset.
    pub(crate) dataset_head: u64,
    /// The id of the next student the plain appends register (shared by every step).
    pub(crate) next_student: Arc<AtomicU64>,
}

/// What one operation did.
#[derive(Default)]
pub(crate) struct Done {
    /// Events appended, read or folded.
    pub(crate) events: u64,
    /// The append's condition failed.
    pub(crate) conflict: bool,
}

fn tagged(tag: String) -> EventQuery {
    EventQuery::item(QueryItem::new(Vec::<String>::new(), [tag]))
}

/// Every event matching `query`, page by page: how many, and the head of the last page.
async fn read_to_end(events: &EventStore, query: &EventQuery) -> anyhow::Result<(u64, Position)> {
    let (mut n, mut after) = (0u64, None);
    loop {
        let page = events.read(query.clone(), after, PAGE).await?;
        n += page.events.len() as u64;
        if page.events.len() < PAGE as usize {
            return Ok((n, page.head));
        }
        after = page.events.last().map(|e| e.position);
    }
}

/// (limit, enrolled, events folded) of a course and of a student, from their events.
type Tally = Projector<(u64, u64, u64)>;

fn projectors(course: u64, student: u64) -> (Tally, Tally) {
    let fold = |field: &'static str| {
        move |state: &mut (u64, u64, u64), e: &StoredEvent| {
            state.2 += 1;
            match e.payload.get(field).and_then(serde_json::Value::as_u64) {
                Some(limit) => state.0 = limit,
                None => state.1 += 1,
            }
        }
    };
    (
        Projector::new(tagged(course_tag(course)), (0, 0, 0), fold("capacity")),
        Projector::new(tagged(student_tag(student)), (0, 0, 0), fold("max_courses")),
    )
}

/// Appends `event` under `condition`: appended, or a conflict.
async fn conditional(
    s: &Scene,
    event: ratchet::NewEvent,
    condition: AppendCondition,
) -> anyhow::Result<Done> {
    let append = EventAppend {
        events: vec![event],
        condition: Some(condition),
        idempotency_key: None,
    };
    match s.events.submit(append).await? {
        AppendOutcome::Appended { .. } => Ok(Done {
            events: 1,
            conflict: false,
        }),
        AppendOutcome::Conflict { .. } => Ok(Done {
            events: 0,
            conflict: true,
        }),
        other => bail!("conditional append: unexpected outcome {other:?}"),
    }
}

/// Runs `op` once.
///
/// # Errors
///
/// The event store's; for `append-if-conflict`, an append that did not conflict where
/// expected.
pub(crate) async fn once(op: Op, s: &Scene, rng: &mut Rng) -> anyhow::Result<Done> {
    let course = rng.below(s.courses);
    let student = rng.below(s.students);
    match op {
        Op::Append => {
            let new = s.next_student.fetch_add(1, Ordering::Relaxed);
            s.events.append(vec![student_registered(new)]).await?;
            Ok(Done {
                events: 1,
                conflict: false,
            })
        }
        Op::AppendBatch => {
            let first = s.next_student.fetch_add(BATCH, Ordering::Relaxed);
            let batch = (first..first + BATCH).map(student_registered).collect();
            s.events.append(batch).await?;
            Ok(Done {
                events: BATCH,
                conflict: false,
            })
        }
        Op::AppendIf => {
            let query = tagged(course_tag(course));
            let newest = EventRead {
                limit: 1,
                direction: Direction::Backward,
                ..EventRead::forward(query.clone(), None, 1)
            };
            let head = s.events.read_with(newest).await?.head;
            conditional(s, student_enrolled(course, student), query.after(head)).await
        }
        Op::Decide => {
            let (mut of_course, mut of_student) = projectors(course, student);
            let condition = s
                .events
                .project(&mut [&mut of_course, &mut of_student])
                .await?;
            conditional(s, student_enrolled(course, student), condition).await
        }
        Op::AppendIfConflict => {
            let defined = s.course_positions[course as usize];
            let append = EventAppend {
                events: vec![student_enrolled(course, student)],
                condition: Some(AppendCondition {
                    fail_if_events_match: tagged(course_tag(course)),
                    after: Some(Position(defined.0 - 1)),
                }),
                idempotency_key: None,
            };
            match s.events.submit(append).await? {
                AppendOutcome::Conflict { position } if position == defined => Ok(Done {
                    events: 0,
                    conflict: true,
                }),
                other => bail!(
                    "append-if-conflict on course c{course}: expected a conflict at {defined}, \
                     got {other:?}"
                ),
            }
        }
        Op::ReadTag => {
            let (n, _) = read_to_end(&s.events, &tagged(student_tag(student))).await?;
            Ok(Done {
                events: n,
                conflict: false,
            })
        }
        Op::ReadType => {
            let after = Position(rng.below(s.dataset_head.max(1)));
            let query = EventQuery::item(QueryItem::new([COURSE_DEFINED], Vec::<String>::new()));
            let page = s.events.read(query, Some(after), 100).await?;
            Ok(Done {
                events: page.events.len() as u64,
                conflict: false,
            })
        }
        Op::Project => {
            let (mut of_course, mut of_student) = projectors(course, student);
            let _condition = s
                .events
                .project(&mut [&mut of_course, &mut of_student])
                .await?;
            Ok(Done {
                events: of_course.state().2 + of_student.state().2,
                conflict: false,
            })
        }
    }
}
