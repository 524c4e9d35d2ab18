//! Course enrollment on Ratchet's event store: courses with a capacity, students with a
//! most number of courses, and enrollment as a conditional append that holds however many
//! clients race for the last seat.

use std::collections::HashMap;

use ratchet::{Error, EventQuery, EventStore, NewEvent, Projector, QueryItem, StoredEvent};
use serde_json::json;

/// The world to set up before clients enroll.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    /// Courses `c0..`.
    pub(crate) courses: u32,
    /// Seats per course.
    pub(crate) capacity: u32,
    /// Students `s0..`.
    pub(crate) students: u32,
    /// Courses one student may take.
    pub(crate) max_courses: u32,
}

/// What became of one enrollment attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Decision {
    /// Enrolled.
    Enrolled,
    /// The course has no free seat.
    CourseFull,
    /// The student takes as many courses as allowed.
    StudentAtLimit,
    /// The student is in this course already.
    AlreadyEnrolled,
    /// No such course or student.
    Unknown,
}

fn course_tag(c: u32) -> String {
    format!("course:c{c}")
}

fn student_tag(s: u32) -> String {
    format!("student:s{s}")
}

/// Defines the courses and registers the students.
pub(crate) async fn define(events: &EventStore, setup: Setup) -> Result<(), Error> {
    let mut all = Vec::new();
    for c in 0..setup.courses {
        all.push(NewEvent::new(
            "CourseDefined",
            [course_tag(c)],
            json!({ "course": c, "capacity": setup.capacity }),
        ));
    }
    for s in 0..setup.students {
        all.push(NewEvent::new(
            "StudentRegistered",
            [student_tag(s)],
            json!({ "student": s, "max_courses": setup.max_courses }),
        ));
    }
    events.append(all).await.map(|_| ())
}

#[derive(Default)]
struct Course {
    capacity: Option<u64>,
    enrolled: u64,
    has_student: bool,
}

#[derive(Default)]
struct Student {
    max_courses: Option<u64>,
    courses: u64,
}

fn number(e: &StoredEvent, field: &str) -> Option<u64> {
    e.payload.get(field).and_then(serde_json::Value::as_u64)
}

/// Tries to enroll student `s` in course `c`: decides on the course's and the student's
/// events, and appends only if neither changed since. Returns the decision and how many
/// times a concurrent change made it decide again.
pub(crate) async fn enroll(events: &EventStore, c: u32, s: u32) -> Result<(Decision, u32), Error> {
    let mut conflicts = 0;
    loop {
        let me = student_tag(s);
        let mut course = Projector::new(
            EventQuery::item(QueryItem::new(
                ["CourseDefined", "StudentEnrolled"],
                [course_tag(c)],
            )),
            Course::default(),
            move |state: &mut Course, e: &StoredEvent| match e.kind.as_str() {
                "CourseDefined" => state.capacity = number(e, "capacity"),
                _ => {
                    state.enrolled += 1;
                    state.has_student |= e.tags.contains(&me);
                }
            },
        );
        let mut student = Projector::new(
            EventQuery::item(QueryItem::new(
                ["StudentRegistered", "StudentEnrolled"],
                [student_tag(s)],
            )),
            Student::default(),
            |state: &mut Student, e: &StoredEvent| match e.kind.as_str() {
                "StudentRegistered" => state.max_courses = number(e, "max_courses"),
                _ => state.courses += 1,
            },
        );
        let condition = events.project(&mut [&mut course, &mut student]).await?;
        let (course, student) = (course.into_state(), student.into_state());
        let (Some(capacity), Some(max_courses)) = (course.capacity, student.max_courses) else {
            return Ok((Decision::Unknown, conflicts));
        };
        let decision = if course.has_student {
            Decision::AlreadyEnrolled
        } else if course.enrolled >= capacity {
            Decision::CourseFull
        } else if student.courses >= max_courses {
            Decision::StudentAtLimit
        } else {
            Decision::Enrolled
        };
        if decision != Decision::Enrolled {
            return Ok((decision, conflicts));
        }
        let event = NewEvent::new(
            "StudentEnrolled",
            [course_tag(c), student_tag(s)],
            json!({ "course": c, "student": s }),
        );
        match events.append_if(vec![event], condition).await {
            Ok(_) => return Ok((Decision::Enrolled, conflicts)),
            Err(Error::AppendConflict { .. }) => conflicts += 1,
            Err(e) => return Err(e),
        }
    }
}

/// What a group of clients did.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Attempts by decision.
    pub(crate) decisions: HashMap<String, u64>,
    /// Decisions made again because of a concurrent change.
    pub(crate) conflicts: u64,
}

/// `clients` concurrent clients each try `attempts` enrollments of pseudo-random pairs.
pub(crate) async fn run_clients(
    events: &EventStore,
    setup: Setup,
    clients: u32,
    attempts: u32,
    seed: u64,
) -> Result<Tally, Error> {
    let runs = (0..clients).map(|i| {
        let events = events.clone();
        async move {
            let mut rng = seed.wrapping_mul(6_364_136_223_846_793_005) ^ u64::from(i + 1);
            let mut next = move |n: u32| {
                // xorshift64: deterministic per seed and client, no dependency.
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                u32::try_from(rng % u64::from(n.max(1))).unwrap_or(0)
            };
            let mut tally = Tally::default();
            for _ in 0..attempts {
                let (c, s) = (next(setup.courses), next(setup.students));
                let (decision, conflicts) = enroll(&events, c, s).await?;
                *tally.decisions.entry(format!("{decision:?}")).or_default() += 1;
                tally.conflicts += u64::from(conflicts);
            }
            Ok::<_, Error>(tally)
        }
    });
    let mut total = Tally::default();
    for tally in futures::future::join_all(runs).await {
        let tally = tally?;
        for (k, v) in tally.decisions {
            *total.decisions.entry(k).or_default() += v;
        }
        total.conflicts += tally.conflicts;
    }
    Ok(total)
}

/// Enrollments counted from the events themselves.
#[derive(Debug, Default)]
pub(crate) struct Census {
    /// Enrolled students per course.
    pub(crate) per_course: HashMap<u64, u64>,
    /// Courses per student.
    pub(crate) per_student: HashMap<u64, u64>,
    /// The same student in the same course twice.
    pub(crate) repeats: u64,
}

/// Counts every enrollment in the store.
pub(crate) async fn census(events: &EventStore) -> Result<Census, Error> {
    use futures::StreamExt;
    let query = EventQuery::item(QueryItem::new(["StudentEnrolled"], Vec::<String>::new()));
    let mut stream = std::pin::pin!(events.read_all(query, None));
    let mut census = Census::default();
    let mut pairs = std::collections::HashSet::new();
    while let Some(e) = stream.next().await {
        let e = e?;
        let (c, s) = (number(&e, "course"), number(&e, "student"));
        let (Some(c), Some(s)) = (c, s) else { continue };
        *census.per_course.entry(c).or_default() += 1;
        *census.per_student.entry(s).or_default() += 1;
        if !pairs.insert((c, s)) {
            census.repeats += 1;
        }
    }
    Ok(census)
}
