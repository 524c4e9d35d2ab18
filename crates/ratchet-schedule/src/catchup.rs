//! What fires after a pause, and what a fire does to a run still going.

use std::str::FromStr;
use std::time::Duration;

use ratchet_core::limits::MAX_DURATION;
use ratchet_core::Timestamp;

use crate::spec::SpecError;

/// The most missed ticks `last N` may fire after an outage: the policy is applied to every
/// tick missed, however long the outage, and this bounds what that costs.
pub const MAX_CATCH_UP: u32 = 10_000;

/// What a fire does while the run started by an earlier fire is still going.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Overlap {
    /// The new tick does not start anything (the default).
    #[default]
    Skip,
    /// One tick waits for the running one to finish; later ones are skipped.
    BufferOne,
    /// Every tick starts its run, however many run at once.
    AllowAll,
    /// The running one is asked to cancel, and the new one starts.
    CancelPrevious,
    /// The running one is terminated, and the new one starts.
    TerminatePrevious,
}

impl Overlap {
    /// Its name: `skip`, `buffer_one`, `allow_all`, `cancel_previous`, `terminate_previous`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::BufferOne => "buffer_one",
            Self::AllowAll => "allow_all",
            Self::CancelPrevious => "cancel_previous",
            Self::TerminatePrevious => "terminate_previous",
        }
    }
}

impl TryFrom<String> for Overlap {
    type Error = SpecError;

    fn try_from(s: String) -> Result<Self, SpecError> {
        s.parse()
    }
}

impl From<Overlap> for String {
    fn from(o: Overlap) -> Self {
        o.as_str().to_string()
    }
}

impl TryFrom<String> for CatchUp {
    type Error = SpecError;

    fn try_from(s: String) -> Result<Self, SpecError> {
        s.parse()
    }
}

impl From<CatchUp> for String {
    fn from(c: CatchUp) -> Self {
        c.to_string()
    }
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Overlap {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, SpecError> {
        [
            Self::Skip,
            Self::BufferOne,
            Self::AllowAll,
            Self::CancelPrevious,
            Self::TerminatePrevious,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
        .ok_or_else(|| SpecError {
            field: "overlap",
            message: format!(
                "{s:?} is not an overlap policy (skip, buffer_one, allow_all, cancel_previous, \
                 terminate_previous)"
            ),
        })
    }
}

/// Which ticks missed while nothing ran (every process down, or behind) still fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CatchUp {
    /// None: the schedule goes on from its next tick.
    Skip,
    /// The most recent `n`, oldest first.
    Last(u32),
    /// Those within this long before now.
    Within(Duration),
}

impl CatchUp {
    /// The policy, if it is within its limits: `last N` with N at most [`MAX_CATCH_UP`],
    /// `within` at most 100 years. (Reading one does not check this, so that a schedule
    /// stored before a limit came is still read.)
    ///
    /// # Errors
    ///
    /// A [`SpecError`] on `catch_up`.
    pub fn checked(self) -> Result<Self, SpecError> {
        let refused = |message: String| SpecError {
            field: "catch_up",
            message,
        };
        match self {
            Self::Last(n) if n > MAX_CATCH_UP => Err(refused(format!(
                "last {n}: at most {MAX_CATCH_UP} missed ticks fire"
            ))),
            Self::Within(d) if d > MAX_DURATION => Err(refused(format!(
                "within {}s: the window is at most 100 years",
                d.as_secs()
            ))),
            ok => Ok(ok),
        }
    }
}

impl Default for CatchUp {
    /// The most recent missed tick.
    fn default() -> Self {
        Self::Last(1)
    }
}

impl std::fmt::Display for CatchUp {
    /// `skip`, `last 3`, `within 600s`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Skip => f.write_str("skip"),
            Self::Last(n) => write!(f, "last {n}"),
            Self::Within(d) => write!(f, "within {}s", d.as_secs()),
        }
    }
}

impl FromStr for CatchUp {
    type Err = SpecError;

    /// `skip`, `last <n>` (`last 1` is the default), or `within <duration>` (`within 10m`).
    fn from_str(s: &str) -> Result<Self, SpecError> {
        let s = s.trim();
        let refused = || SpecError {
            field: "catch_up",
            message: format!(
                "{s:?} is not a catch-up policy (skip, last <n>, within <duration> such as \
                 within 10m)"
            ),
        };
        if s == "skip" {
            return Ok(Self::Skip);
        }
        if let Some(n) = s.strip_prefix("last ") {
            return n.trim().parse().map(Self::Last).map_err(|_| refused());
        }
        if let Some(d) = s.strip_prefix("within ") {
            return crate::spec::parse_duration(d)
                .map(Self::Within)
                .ok_or_else(refused);
        }
        Err(refused())
    }
}

/// Of `ticks` (oldest first, none after `now`), those `catch_up` keeps, oldest first: ticks
/// late by no more than `grace` always; and how many were skipped. A backlog too long to look
/// at whole is looked at a part at a time, oldest first: `later_missed` says how many missed
/// ticks come after `ticks` (counted up to N is enough), so that `last N` keeps the newest N
/// of all that were missed, not of each part.
pub fn keep(
    ticks: &[Timestamp],
    now: Timestamp,
    catch_up: CatchUp,
    grace: Duration,
    later_missed: usize,
) -> (Vec<Timestamp>, usize) {
    let grace = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let (missed, on_time): (Vec<Timestamp>, Vec<Timestamp>) =
        ticks.iter().partition(|t| now.0 - t.0 > grace);
    let kept: Vec<Timestamp> = match catch_up {
        CatchUp::Skip => Vec::new(),
        CatchUp::Last(n) => {
            let here = (n as usize).saturating_sub(later_missed);
            missed[missed.len().saturating_sub(here)..].to_vec()
        }
        CatchUp::Within(window) => {
            let window = i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
            missed
                .iter()
                .copied()
                .filter(|t| now.0 - t.0 <= window)
                .collect()
        }
    };
    let skipped = missed.len() - kept.len();
    (kept.into_iter().chain(on_time).collect(), skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Schedule;
    use chrono_tz::Tz;

    /// What fires at `now` after `after`: the ticks between, kept by the policy.
    fn due(
        schedule: &Schedule,
        after: Timestamp,
        now: Timestamp,
        catch_up: CatchUp,
        grace: Duration,
        limit: usize,
    ) -> (Vec<Timestamp>, usize) {
        keep(
            &schedule.between(after, now, limit),
            now,
            catch_up,
            grace,
            0,
        )
    }

    fn every_second() -> Schedule {
        Schedule::new(
            "every 1s".parse().expect("spec"),
            Tz::UTC,
            None,
            None,
            Timestamp(0),
        )
        .expect("schedule")
    }

    #[test]
    fn catch_up_keeps_what_its_policy_says_and_due_ticks_always_fire() {
        let s = every_second();
        let grace = Duration::from_millis(500);
        // Down from 10 s to 40.2 s: ticks 11..=40 missed, none due.
        let (fire, skipped) = due(
            &s,
            Timestamp(10_000),
            Timestamp(40_200),
            CatchUp::Skip,
            grace,
            1000,
        );
        assert_eq!(
            (fire.len(), skipped),
            (1, 29),
            "40 s is late by 200 ms only: due"
        );
        let (fire, skipped) = due(
            &s,
            Timestamp(10_000),
            Timestamp(40_900),
            CatchUp::Skip,
            grace,
            1000,
        );
        assert_eq!((fire, skipped), (vec![], 30));
        let (fire, _) = due(
            &s,
            Timestamp(10_000),
            Timestamp(40_900),
            CatchUp::Last(3),
            grace,
            1000,
        );
        assert_eq!(
            fire,
            vec![Timestamp(38_000), Timestamp(39_000), Timestamp(40_000)]
        );
        let (fire, skipped) = due(
            &s,
            Timestamp(10_000),
            Timestamp(40_900),
            CatchUp::Within(Duration::from_secs(5)),
            grace,
            1000,
        );
        assert_eq!(fire.first(), Some(&Timestamp(36_000)));
        assert_eq!((fire.len(), skipped), (5, 25));
        let (fire, _) = due(
            &s,
            Timestamp(10_000),
            Timestamp(40_900),
            CatchUp::Last(100),
            grace,
            1000,
        );
        assert_eq!(fire.len(), 30, "never more than were missed");
        // The oldest part of a longer backlog: the newest missed ticks come later.
        let part = s.between(Timestamp(10_000), Timestamp(20_000), 1000);
        let now = Timestamp(40_900);
        assert_eq!(
            keep(&part, now, CatchUp::Last(3), grace, 20),
            (vec![], 10),
            "all three are later"
        );
        assert_eq!(
            keep(&part, now, CatchUp::Last(3), grace, 1),
            (vec![Timestamp(19_000), Timestamp(20_000)], 8),
            "two of three here"
        );
    }

    #[test]
    fn overlap_policies_parse_by_name_and_refuse_others() {
        for o in [
            Overlap::Skip,
            Overlap::BufferOne,
            Overlap::AllowAll,
            Overlap::CancelPrevious,
            Overlap::TerminatePrevious,
        ] {
            assert_eq!(o.as_str().parse::<Overlap>(), Ok(o));
        }
        assert_eq!(
            "sometimes".parse::<Overlap>().expect_err("refused").field,
            "overlap"
        );
        for c in [
            CatchUp::Skip,
            CatchUp::Last(3),
            CatchUp::Within(Duration::from_secs(600)),
        ] {
            assert_eq!(c.to_string().parse::<CatchUp>(), Ok(c));
        }
        assert_eq!(
            "within 10m".parse(),
            Ok(CatchUp::Within(Duration::from_secs(600)))
        );
        assert_eq!(
            "last".parse::<CatchUp>().expect_err("refused").field,
            "catch_up"
        );
        for refused in ["last 10001", "within 36526d"] {
            let parsed = refused.parse::<CatchUp>().expect("it reads");
            assert_eq!(parsed.checked().expect_err(refused).field, "catch_up");
        }
        assert_eq!(
            "last 10000".parse::<CatchUp>().and_then(CatchUp::checked),
            Ok(CatchUp::Last(MAX_CATCH_UP))
        );
    }
}
