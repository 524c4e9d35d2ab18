//! `ratchet events append | read | tail` against the store: events from flags and JSON read
//! back by tag, a conditional append refused with exit status 3, bad input refused before
//! anything is appended, and `tail` printing an event appended after it started.

use std::io::{BufRead, BufReader, Write};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ratchet::{EventQuery, EventStore, Store};

fn events_cli(args: &[String], words: &[&str], stdin: Option<&str>) -> Output {
    let mut child = super::common::ratchet(args)
        .arg("events")
        .args(words)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).trim().to_string()
}

/// Every event in the store.
async fn all(store: &Arc<dyn Store>) -> Vec<ratchet::StoredEvent> {
    EventStore::new(store.clone())
        .read(EventQuery::all(), None, 1000)
        .await
        .unwrap()
        .events
}

pub(crate) async fn events_are_appended_read_conditioned_and_refused_from_the_cli(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let run = |words: &[&str]| events_cli(&args, words, None);
    let out = run(&[
        "append",
        "--type",
        "CourseDefined",
        "--tag",
        "course:c1",
        "--payload",
        r#"{"capacity": 2}"#,
        "--metadata",
        r#"{"by": "test"}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "appended 1");
    let enrolled = r#"[
        {"type": "StudentEnrolled", "tags": ["course:c1", "student:s1"], "payload": {"n": 1}},
        {"type": "StudentEnrolled", "tags": ["course:c2", "student:s1"]}
    ]"#;
    let out = run(&["append", "--json", enrolled]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "appended 2..3");
    let out = events_cli(
        &args,
        &["append", "--json", "-"],
        Some(r#"[{"type": "StudentEnrolled", "tags": ["course:c1", "student:s2"]}]"#),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "appended 4");

    // Read back by tag, as JSON lines and as a table.
    let out = run(&["read", "--tag", "course:c1", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let positions: Vec<u64> = lines
        .iter()
        .map(|l| l["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [1, 2, 4]);
    assert_eq!(lines[0]["type"], "CourseDefined");
    assert_eq!(lines[0]["payload"]["capacity"], 2);
    assert_eq!(lines[0]["metadata"]["by"], "test");
    // Times as the API gives them everywhere: RFC 3339 in UTC, to the millisecond.
    let recorded = lines[0]["recorded_at"].as_str().unwrap();
    assert!(
        recorded.len() == 24 && recorded.ends_with('Z') && recorded.as_bytes()[10] == b'T',
        "{recorded}"
    );
    assert_eq!(
        lines[1]["tags"],
        serde_json::json!(["course:c1", "student:s1"])
    );
    let out = run(&["read", "--type", "StudentEnrolled", "--tag", "student:s1"]);
    let table = text(&out.stdout);
    assert!(
        table.lines().next().unwrap().contains("position"),
        "{table}"
    );
    assert_eq!(
        table.lines().count(),
        3,
        "a header and two events:\n{table}"
    );
    let out = run(&["read", "--backward", "--limit", "1", "--json"]);
    let newest: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(newest["position"], 4);

    // A decision made at position 1 on course c1: events 2 and 4 arrived since.
    let out = run(&[
        "append",
        "--type",
        "StudentEnrolled",
        "--tag",
        "course:c1",
        "--tag",
        "student:s3",
        "--fail-if-tag",
        "course:c1",
        "--fail-if-type",
        "StudentEnrolled",
        "--after",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("conflict: event 2"),
        "{}",
        text(&out.stderr)
    );
    // The same decision made at the head holds.
    let out = run(&[
        "append",
        "--type",
        "StudentEnrolled",
        "--tag",
        "course:c1",
        "--tag",
        "student:s3",
        "--fail-if",
        r#"[{"types": ["StudentEnrolled"], "tags": ["course:c1"]}]"#,
        "--after",
        "4",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "appended 5");
    assert_eq!(all(&store).await.len(), 5);

    // Bad input: refused with its reason, nothing appended.
    let bad: &[(&[&str], &str)] = &[
        (&["append", "--type", "A", "--tag", "course"], "key:value"),
        (&["append", "--type", " "], "empty"),
        (
            &[
                "append",
                "--json",
                r#"[{"type": "A"}, {"type": "B", "tags": ["x"]}]"#,
            ],
            "event 1",
        ),
        (&["append", "--json", "[{"], "--json must be"),
        (
            &["append", "--type", "A", "--payload", "nope"],
            "--payload must be JSON",
        ),
    ];
    for (words, reason) in bad {
        let out = run(words);
        assert!(!out.status.success(), "{words:?} accepted");
        assert_ne!(out.status.code(), Some(3), "{words:?} is not a conflict");
        assert!(
            text(&out.stderr).contains(reason),
            "{words:?}: {}",
            text(&out.stderr)
        );
    }
    let out = run(&["read", "--tag", "nocolon"]);
    assert!(!out.status.success() && text(&out.stderr).contains("key:value"));
    assert_eq!(all(&store).await.len(), 5, "nothing appended by bad input");
}

pub(crate) async fn events_tail_prints_an_event_appended_after_it_started(
    args: Vec<String>,
    store: Arc<dyn Store>,
) {
    let events = EventStore::new(store.clone());
    events
        .append(vec![ratchet::NewEvent::new(
            "Before",
            ["course:c1"],
            serde_json::json!(1),
        )])
        .await
        .unwrap();
    let mut tail = super::common::ratchet(&args)
        .args(["events", "tail", "--tag", "course:c1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The event from before it started comes first: then it is following.
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("a line from tail");
    assert!(first.contains("\"Before\""), "{first}");
    // Another boundary's event is not printed; the matching one after it is.
    for (kind, tag) in [("Elsewhere", "course:c2"), ("After", "course:c1")] {
        events
            .append(vec![ratchet::NewEvent::new(
                kind,
                [tag],
                serde_json::json!(2),
            )])
            .await
            .unwrap();
    }
    let next = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("tail printed the new event");
    let _ = tail.kill();
    let _ = tail.wait();
    let event: serde_json::Value = serde_json::from_str(&next).unwrap();
    assert_eq!(event["type"], "After");
    assert_eq!(event["position"], 3);
}
