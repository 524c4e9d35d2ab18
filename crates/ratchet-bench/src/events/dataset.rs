//! The course-enrollment dataset: courses defined, students registered, students enrolled in
//! courses, interleaved the way a live system would write them, loaded with bulk appends.

use ratchet::{AppendOutcome, EventAppend, NewEvent, Position, Store, Timestamp};
use serde_json::json;

use super::Rng;

/// How big a dataset is.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Size {
    /// 5 courses, 10 students, 20 enrollments.
    Tiny,
    /// 500 courses, 5,000 students, 25,000 enrollments.
    Small,
    /// 1,000 courses, 10,000 students, 50,000 enrollments.
    Medium,
}

impl Size {
    /// (courses, students, enrollments)
    pub(crate) fn counts(self) -> (u64, u64, u64) {
        match self {
            Size::Tiny => (5, 10, 20),
            Size::Small => (500, 5_000, 25_000),
            Size::Medium => (1_000, 10_000, 50_000),
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Size::Tiny => "tiny",
            Size::Small => "small",
            Size::Medium => "medium",
        }
    }
}

pub(crate) fn course_tag(c: u64) -> String {
    format!("course:c{c}")
}

pub(crate) fn student_tag(s: u64) -> String {
    format!("student:s{s}")
}

pub(crate) const COURSE_DEFINED: &str = "CourseDefined";
pub(crate) const STUDENT_REGISTERED: &str = "StudentRegistered";
pub(crate) const STUDENT_ENROLLED: &str = "StudentEnrolled";

pub(crate) fn course_defined(c: u64) -> NewEvent {
    NewEvent::new(
        COURSE_DEFINED,
        [course_tag(c)],
        json!({ "course": format!("c{c}"), "capacity": 20 + c % 80 }),
    )
}

pub(crate) fn student_registered(s: u64) -> NewEvent {
    NewEvent::new(
        STUDENT_REGISTERED,
        [student_tag(s)],
        json!({ "student": format!("s{s}"), "max_courses": 5 + s % 6 }),
    )
}

pub(crate) fn student_enrolled(c: u64, s: u64) -> NewEvent {
    NewEvent::new(
        STUDENT_ENROLLED,
        [course_tag(c), student_tag(s)],
        json!({ "course": format!("c{c}"), "student": format!("s{s}") }),
    )
}

/// What loading left in the store.
pub(crate) struct Loaded {
    /// The position of each course's `CourseDefined`.
    pub(crate) course_positions: Vec<Position>,
    pub(crate) events: u64,
    pub(crate) seconds: f64,
}

/// The dataset's events in the order they are appended: definitions spread through the log
/// (so a read by type finds them everywhere), each enrollment of a course and a student
/// defined before it. Returns the events and the index of each course's definition.
fn events(size: Size, rng: &mut Rng) -> (Vec<NewEvent>, Vec<usize>) {
    let (courses, students, enrollments) = size.counts();
    let (mut c, mut s, mut e) = (0u64, 0u64, 0u64);
    let mut out = Vec::with_capacity((courses + students + enrollments) as usize);
    let mut course_index = Vec::with_capacity(courses as usize);
    while c < courses || s < students || e < enrollments {
        let left = (courses - c) + (students - s) + (enrollments - e);
        let r = rng.below(left);
        let course = r < courses - c;
        let student = !course && r < (courses - c) + (students - s);
        if course || (!student && c == 0) {
            course_index.push(out.len());
            out.push(course_defined(c));
            c += 1;
        } else if student || s == 0 {
            out.push(student_registered(s));
            s += 1;
        } else {
            out.push(student_enrolled(rng.below(c), rng.below(s)));
            e += 1;
        }
    }
    (out, course_index)
}

/// Appends the dataset in bulk appends of `batch` events, straight to the store (one
/// transaction each).
///
/// # Errors
///
/// The store's, or an append that did not append.
pub(crate) async fn load(
    store: &dyn Store,
    size: Size,
    batch: usize,
    rng: &mut Rng,
) -> anyhow::Result<Loaded> {
    let (all, course_index) = events(size, rng);
    let started = std::time::Instant::now();
    let mut firsts = Vec::new();
    for chunk in all.chunks(batch.max(1)) {
        let append = EventAppend {
            events: chunk.to_vec(),
            ..EventAppend::default()
        };
        match store.event_append(vec![append], Timestamp::now()).await?[..] {
            [AppendOutcome::Appended { first, .. }] => firsts.push(first.0),
            ref other => anyhow::bail!("loading the dataset: the store answered {other:?}"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let batch = batch.max(1);
    let course_positions = course_index
        .iter()
        .map(|i| Position(firsts[i / batch] + (i % batch) as u64))
        .collect();
    Ok(Loaded {
        course_positions,
        events: all.len() as u64,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dataset_has_its_counts_and_enrolls_only_defined_ids() {
        let mut rng = Rng::new(7);
        let (events, course_index) = events(Size::Tiny, &mut rng);
        let count = |kind: &str| events.iter().filter(|e| e.kind == kind).count();
        assert_eq!(count(COURSE_DEFINED), 5);
        assert_eq!(count(STUDENT_REGISTERED), 10);
        assert_eq!(count(STUDENT_ENROLLED), 20);
        assert_eq!(course_index.len(), 5);
        for (c, i) in course_index.iter().enumerate() {
            assert_eq!(events[*i].tags, [course_tag(c as u64)]);
        }
        let mut defined = std::collections::HashSet::new();
        for e in &events {
            if e.kind == STUDENT_ENROLLED {
                assert!(e.tags.iter().all(|t| defined.contains(t)), "{e:?}");
            } else {
                defined.extend(e.tags.iter().cloned());
            }
        }
    }
}
