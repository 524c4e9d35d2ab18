//! `ratchet events ...`: append events (with or without a condition), read them by query, and
//! follow them live.

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use futures::StreamExt as _;
use ratchet::{EventQuery, NewEvent, QueryItem};
use ratchet_api::{
    Api, AppendInput, ConditionInput, DirectionParam, EventView, ItemInput, QueryInput, ReadQuery,
    StreamQuery,
};
use serde::Deserialize;

/// The exit status of `events append` when its condition failed (nothing appended).
pub(crate) const CONFLICT_EXIT: i32 = 3;

/// `ratchet events ...`
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum EventCommand {
    /// Append events atomically, optionally only if no event matching a query arrived after
    /// a position.
    ///
    /// Prints `appended FIRST..LAST`. Exit status: 0 when appended (or a duplicate of an
    /// earlier append with the same --idempotency-key), 3 when the condition failed (nothing
    /// appended; the conflicting position is printed on stderr), 1 for any other error
    /// (bad input is refused before anything is appended).
    #[command(
        after_help = "Exit status: 0 appended or duplicate, 3 conflict (nothing \
                            appended), 1 other errors."
    )]
    Append(AppendArgs),
    /// Print the events matching a query in a range, as a table or one JSON object per line.
    Read {
        #[command(flatten)]
        query: QueryArgs,
        /// Only events after this position.
        #[arg(long)]
        after: Option<u64>,
        /// Only events before this position.
        #[arg(long)]
        before: Option<u64>,
        /// At most this many.
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// Newest first.
        #[arg(long)]
        backward: bool,
        /// One JSON object per line: position, type, tags, payload, metadata, recorded_at
        /// (milliseconds since the Unix epoch).
        #[arg(long)]
        json: bool,
    },
    /// Print the events matching a query, then each new one as it is appended, until Ctrl-C.
    Tail {
        #[command(flatten)]
        query: QueryArgs,
        /// Start after this position (default: from the first event).
        #[arg(long, conflicts_with = "from_end")]
        after: Option<u64>,
        /// Start at the head: only events appended from now on.
        #[arg(long)]
        from_end: bool,
        /// One JSON object per line, as `events read --json`.
        #[arg(long)]
        json: bool,
    },
}

/// `events append`'s flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct AppendArgs {
    /// The event's type (one event from flags; or use --json).
    #[arg(
        long = "type",
        value_name = "TYPE",
        required_unless_present_any = ["json", "cloudevent"]
    )]
    kind: Option<String>,
    /// A `key:value` tag of the event (repeat for more).
    #[arg(long = "tag", value_name = "KEY:VALUE", conflicts_with = "json")]
    tags: Vec<String>,
    /// The event's payload as JSON (`@path` and `-` read it from a file or stdin).
    #[arg(long, default_value = "null", conflicts_with = "json")]
    payload: String,
    /// The event's metadata as JSON.
    #[arg(long, conflicts_with = "json")]
    metadata: Option<String>,
    /// The events as a JSON array, `[{"type": .., "tags": [..], "payload": .., "metadata": ..}]`
    /// (a single object is one event); `@path` reads it from a file, `-` from stdin.
    #[arg(long, value_name = "JSON|-", conflicts_with_all = ["kind", "cloudevent"])]
    json: Option<String>,
    /// The events as CloudEvents 1.0 in structured JSON (one object, or an array of them):
    /// `type` is the event's type, `data` its payload, the extension `tags` its tags, every
    /// other attribute its metadata; `@path` reads it from a file, `-` from stdin.
    #[arg(long, value_name = "JSON|-", conflicts_with = "kind")]
    cloudevent: Option<String>,
    /// Fail if an event matching this query exists after --after: JSON of a query, a list of
    /// items `[{"types": [..], "tags": [..]}]` (ORed; `[]` matches every event).
    #[arg(long, value_name = "QUERY_JSON")]
    fail_if: Option<String>,
    /// Fail if an event of this type (repeat: any of them) exists after --after; with
    /// --fail-if-tag, one query item.
    #[arg(long, value_name = "TYPE", conflicts_with = "fail_if")]
    fail_if_type: Vec<String>,
    /// Fail if an event carrying this tag (repeat: all of them) exists after --after.
    #[arg(long, value_name = "KEY:VALUE", conflicts_with = "fail_if")]
    fail_if_tag: Vec<String>,
    /// The position the decision saw: the condition looks at events after it (default: at
    /// every event).
    #[arg(long)]
    after: Option<u64>,
    /// Append at most once per key: a repeat appends nothing and prints the first append's
    /// positions.
    #[arg(long)]
    idempotency_key: Option<String>,
}

/// A query from flags: one item of types (any of them) and tags (all of them), or JSON.
#[derive(Args, Debug, Clone)]
pub(crate) struct QueryArgs {
    /// Only events of this type (repeat: any of them).
    #[arg(long = "type", value_name = "TYPE")]
    types: Vec<String>,
    /// Only events carrying this `key:value` tag (repeat: all of them).
    #[arg(long = "tag", value_name = "KEY:VALUE")]
    tags: Vec<String>,
    /// The query as JSON: a list of items `[{"types": [..], "tags": [..]}]`, ORed.
    #[arg(long, value_name = "JSON", conflicts_with_all = ["types", "tags"])]
    query: Option<String>,
}

impl QueryArgs {
    /// The query's items, checked.
    fn items(&self) -> anyhow::Result<Vec<ItemInput>> {
        let items = match &self.query {
            Some(text) => parse_query(text, "--query")?,
            None => one_item(&self.types, &self.tags),
        };
        checked(&items)?;
        Ok(items)
    }
}

/// Refuses a query the store would refuse, before anything is asked.
fn checked(items: &[ItemInput]) -> anyhow::Result<()> {
    EventQuery {
        items: items
            .iter()
            .map(|i| QueryItem::new(&i.types, &i.tags))
            .collect(),
    }
    .validate()?;
    Ok(())
}

/// One event as given in `--json`: the fields of [`NewEvent`], and no others (a misspelt
/// field is an error, not a silently dropped tag).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EventInput {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    payload: serde_json::Value,
    #[serde(default)]
    metadata: serde_json::Value,
}

impl From<EventInput> for NewEvent {
    fn from(e: EventInput) -> Self {
        NewEvent::new(e.kind, e.tags, e.payload).with_metadata(e.metadata)
    }
}

use crate::input::json;

fn parse_query(text: &str, flag: &str) -> anyhow::Result<Vec<ItemInput>> {
    serde_json::from_str(text).with_context(|| {
        format!("{flag} must be a JSON list of query items: [{{\"types\": [..], \"tags\": [..]}}]")
    })
}

/// The query of one item; no types and no tags is the query of every event.
fn one_item(types: &[String], tags: &[String]) -> Vec<ItemInput> {
    vec![ItemInput {
        types: types.to_vec(),
        tags: tags.to_vec(),
    }]
}

/// Builds the append from the flags (stdin read for `--json -`) and checks it, so that bad
/// input is refused before the database is opened.
pub(crate) fn parse_append(args: &AppendArgs) -> anyhow::Result<AppendInput> {
    let events: Vec<NewEvent> = match (&args.json, &args.kind, &args.cloudevent) {
        (_, _, Some(text)) => {
            let text = crate::input::text(text, "--cloudevent")?;
            let value: serde_json::Value = serde_json::from_str(&text).context(
                "--cloudevent must be a CloudEvent in structured JSON, or an array of them",
            )?;
            let list = match value {
                serde_json::Value::Array(list) => list,
                one => vec![one],
            };
            list.into_iter()
                .enumerate()
                .map(|(i, e)| {
                    NewEvent::from_cloud_event(e)
                        .with_context(|| format!("--cloudevent: event {i}"))
                })
                .collect::<anyhow::Result<_>>()?
        }
        (Some(text), _, None) => {
            let text = crate::input::text(text, "--json")?;
            let shape = "--json must be a JSON array of events: \
                 [{\"type\": \"..\", \"tags\": [\"key:value\"], \"payload\": .., \"metadata\": ..}]";
            let value: serde_json::Value = serde_json::from_str(&text).context(shape)?;
            // Parsed by shape, so that the error names the bad field.
            let parsed = if value.is_array() {
                serde_json::from_value::<Vec<EventInput>>(value)
            } else {
                serde_json::from_value::<EventInput>(value).map(|e| vec![e])
            };
            parsed
                .context(shape)?
                .into_iter()
                .map(NewEvent::from)
                .collect()
        }
        (None, Some(kind), None) => {
            let mut event = NewEvent::new(kind, &args.tags, json(&args.payload, "--payload")?);
            if let Some(metadata) = &args.metadata {
                event = event.with_metadata(json(metadata, "--metadata")?);
            }
            vec![event]
        }
        (None, None, None) => {
            bail!("give the event with --type (and --tag, --payload), --json or --cloudevent")
        }
    };
    let query = match &args.fail_if {
        Some(text) => Some(parse_query(text, "--fail-if")?),
        None if args.fail_if_type.is_empty() && args.fail_if_tag.is_empty() => None,
        None => Some(one_item(&args.fail_if_type, &args.fail_if_tag)),
    };
    if query.is_none() && args.after.is_some() {
        bail!("--after needs a condition: --fail-if, --fail-if-type or --fail-if-tag");
    }
    let append = AppendInput {
        events: events
            .into_iter()
            .map(|e| ratchet_api::EventInput {
                kind: e.kind,
                tags: e.tags,
                payload: e.payload,
                metadata: e.metadata,
            })
            .collect(),
        condition: query.map(|q| ConditionInput {
            fail_if_events_match: q,
            after: args.after,
        }),
        idempotency_key: args.idempotency_key.clone(),
    };
    append
        .to_append()
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .validate()?;
    Ok(append)
}

/// Runs an events command; `append` is the parsed append of an `append` command.
pub(crate) async fn run(
    api: &dyn Api,
    cmd: EventCommand,
    append: Option<AppendInput>,
) -> anyhow::Result<()> {
    match cmd {
        EventCommand::Append(_) => {
            let append = append.context("the append was not parsed")?;
            let after = append.condition.as_ref().and_then(|c| c.after);
            match api.events_append(&append).await {
                Ok(a) if a.duplicate => out!(
                    "duplicate: the idempotency key was used by the append at {}; nothing appended",
                    span(a.first, a.last)
                ),
                Ok(a) => out!("appended {}", span(a.first, a.last)),
                Err(e) => match e
                    .problem()
                    .and_then(|p| (p.kind_name() == "append-conflict").then_some(p.position)?)
                {
                    Some(position) => {
                        let since =
                            after.map_or_else(String::new, |a| format!(" after position {a}"));
                        eprintln!(
                            "conflict: event {position} matches the condition{since}; nothing appended"
                        );
                        std::process::exit(CONFLICT_EXIT);
                    }
                    None => return Err(e.into()),
                },
            }
        }
        EventCommand::Read {
            query,
            after,
            before,
            limit,
            backward,
            json,
        } => {
            let read = QueryInput {
                query: query.items()?,
                after,
                before,
                limit: Some(limit),
                direction: if backward {
                    DirectionParam::Backward
                } else {
                    DirectionParam::Forward
                },
            };
            let page = api.events_query(&read).await?.events;
            if !json {
                out!("{}", header());
            }
            for e in &page {
                print_event(e, json)?;
            }
            if page.len() == limit as usize {
                if let Some(last) = page.last() {
                    let flag = if backward { "--before" } else { "--after" };
                    eprintln!(
                        "(limit reached: more may follow with {flag} {})",
                        last.position
                    );
                }
            }
        }
        EventCommand::Tail {
            query,
            after,
            from_end,
            json,
        } => {
            let items = query.items()?;
            // The stream takes one item of types (any) and tags (all), as flags give it.
            let [item] = &items[..] else {
                bail!(
                    "following a query of several items is not possible: give one --type/--tag set"
                );
            };
            let after = if from_end {
                let head = ReadQuery {
                    limit: Some(1),
                    direction: DirectionParam::Backward,
                    ..ReadQuery::default()
                };
                Some(api.events_read(&head).await?.head)
            } else {
                after
            };
            if !json {
                out!("{}", header());
            }
            let follow = StreamQuery {
                types: (!item.types.is_empty()).then(|| item.types.join(",")),
                tags: (!item.tags.is_empty()).then(|| item.tags.join(",")),
                after,
            };
            let stream = api.events_stream(&follow).await?;
            futures::pin_mut!(stream);
            let stop = crate::worker::wait_for_stop();
            futures::pin_mut!(stop);
            loop {
                tokio::select! {
                    () = &mut stop => break,
                    next = stream.next() => match next {
                        Some(Ok(e)) => print_event(&e, json)?,
                        // The stream carries on after a pause: say so and keep following.
                        Some(Err(e)) => eprintln!("reading events failed, retrying: {e}"),
                        None => break,
                    },
                }
            }
        }
    }
    Ok(())
}

fn span(first: u64, last: u64) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}..{last}")
    }
}

fn header() -> String {
    format!("{:>10} {:<24} {:<40} payload", "position", "type", "tags")
}

/// `text` cut to `max` characters, with an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

fn print_event(e: &EventView, json: bool) -> anyhow::Result<()> {
    if json {
        out!("{}", serde_json::to_string(e)?);
    } else {
        out!(
            "{:>10} {:<24} {:<40} {}",
            e.position,
            truncate(&e.kind, 24),
            truncate(&e.tags.join(","), 40),
            truncate(&serde_json::to_string(&e.payload)?, 60)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: EventCommand,
    }

    fn append(words: &[&str]) -> anyhow::Result<AppendInput> {
        let cli = Cli::try_parse_from(std::iter::once("events").chain(words.iter().copied()))?;
        match cli.cmd {
            EventCommand::Append(args) => parse_append(&args),
            _ => bail!("not an append"),
        }
    }

    #[test]
    fn flags_make_one_event_and_one_condition_item() {
        let a = append(&[
            "append",
            "--type",
            "StudentEnrolled",
            "--tag",
            "course:c1",
            "--tag",
            "student:s1",
            "--payload",
            r#"{"n": 1}"#,
            "--fail-if-type",
            "StudentEnrolled",
            "--fail-if-tag",
            "course:c1",
            "--after",
            "7",
        ])
        .expect("parsed");
        assert_eq!(a.events.len(), 1);
        assert_eq!(a.events[0].tags, ["course:c1", "student:s1"]);
        assert_eq!(a.events[0].payload["n"], 1);
        let c = a.condition.expect("a condition");
        assert_eq!(c.after, Some(7));
        assert_eq!(
            c.fail_if_events_match,
            [ItemInput {
                types: vec!["StudentEnrolled".into()],
                tags: vec!["course:c1".into()]
            }]
        );
    }

    #[test]
    fn json_events_and_queries_parse() {
        let a = append(&[
            "append",
            "--json",
            r#"[{"type": "A", "tags": ["k:v"]}, {"type": "B", "payload": [1]}]"#,
            "--fail-if",
            r#"[{"tags": ["k:v"]}, {"types": ["B"]}]"#,
        ])
        .expect("parsed");
        assert_eq!(a.events.len(), 2);
        assert_eq!(
            a.condition.expect("condition").fail_if_events_match.len(),
            2
        );
        let one = append(&["append", "--json", r#"{"type": "A"}"#]).expect("one object");
        assert_eq!(one.events.len(), 1);
        let cloud = append(&[
            "append",
            "--cloudevent",
            r#"[{"specversion": "1.0", "id": "1", "source": "s", "type": "A", "tags": ["k:v"], "data": 5},
                {"specversion": "1.0", "id": "2", "source": "s", "type": "B", "subject": "x"}]"#,
        ])
        .expect("two CloudEvents");
        assert_eq!(cloud.events[0].tags, ["k:v"]);
        assert_eq!(cloud.events[0].payload, serde_json::json!(5));
        assert_eq!(cloud.events[1].metadata["subject"], "x");
    }

    #[test]
    fn bad_input_is_refused_with_its_reason() {
        let cases: &[(&[&str], &str)] = &[
            (&["append", "--type", "A", "--tag", "nokey"], "key:value"),
            (&["append", "--type", " "], "type must not be empty"),
            (
                &["append", "--type", "A", "--payload", "{"],
                "--payload must be JSON",
            ),
            (
                &["append", "--json", "[{\"type\": \"A\", \"tag\": []}]"],
                "--json",
            ),
            (&["append", "--json", "[]"], "at least one event"),
            (
                &[
                    "append",
                    "--cloudevent",
                    r#"{"id": "1", "source": "s", "type": "A"}"#,
                ],
                "needs `specversion`",
            ),
            (&["append", "--type", "A", "--after", "3"], "--after needs"),
            (&["append", "--type", "A", "--fail-if", "{}"], "--fail-if"),
            (
                &["append", "--type", "A", "--fail-if-tag", "x"],
                "key:value",
            ),
        ];
        for (words, expected) in cases {
            let err = format!("{:#}", append(words).expect_err("refused"));
            assert!(err.contains(expected), "{words:?}: {err}");
        }
    }

    #[test]
    fn long_text_is_cut_on_a_character() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("ééé", 2), "éé…");
    }
}
