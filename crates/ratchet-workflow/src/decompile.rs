//! The decompiler: a compiled workflow written back as canonical YAML. Every field is written
//! the one way the compiler reads back to the same workflow: expressions as `"${ code }"`,
//! strings double-quoted, durations in ISO 8601, defaults spelled out.

use std::time::Duration;

use serde_json::Value;

use crate::expr::Expr;
use crate::model::{
    Auth, Block, Catch, Endpoint, ErrorTemplate, Flow, Kind, Retry, Schema, Task, Template,
};
use crate::Workflow;

/// A YAML node to write.
enum Y {
    /// Written as is: a number, `true`, `null`, or a quoted string.
    Scalar(String),
    Map(Vec<(String, Y)>),
    Seq(Vec<Y>),
}

fn text(s: &str) -> Y {
    Y::Scalar(serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()))
}

fn expr(e: &Expr) -> Y {
    text(&format!("${{ {} }}", e.code))
}

fn value(v: &Value) -> Y {
    match v {
        Value::String(s) => text(s),
        Value::Array(items) => Y::Seq(items.iter().map(value).collect()),
        Value::Object(fields) => {
            Y::Map(fields.iter().map(|(k, v)| (k.clone(), value(v))).collect())
        }
        other => Y::Scalar(other.to_string()),
    }
}

/// A `listen` filter: `{with: {type}}` for a signal, the event's attributes and
/// correlations for an event.
fn filter(f: &crate::model::Filter) -> Y {
    let e = match f {
        crate::model::Filter::Signal(name) => {
            return Y::Map(vec![(
                "with".into(),
                Y::Map(vec![("type".to_string(), text(name))]),
            )])
        }
        crate::model::Filter::Event(e) => e,
    };
    let mut with = Vec::new();
    if let Some(kind) = &e.kind {
        with.push(("type".to_string(), text(kind)));
    }
    if let Some(tags) = &e.tags {
        with.push(("tags".to_string(), template(tags)));
    }
    with.extend(e.with.iter().map(|(k, t)| (k.clone(), template(t))));
    let mut out = vec![("with".to_string(), Y::Map(with))];
    if !e.correlate.is_empty() {
        let each = e.correlate.iter().map(|(key, from, expect)| {
            let mut c = vec![("from".to_string(), self::expr(from))];
            if let Some(t) = expect {
                c.push(("expect".into(), template(t)));
            }
            (key.clone(), Y::Map(c))
        });
        out.push(("correlate".into(), Y::Map(each.collect())));
    }
    Y::Map(out)
}

fn template(t: &Template) -> Y {
    match t {
        Template::Literal(v) => value(v),
        Template::Expr(e) => expr(e),
        Template::Array(items) => Y::Seq(items.iter().map(template).collect()),
        Template::Object(fields) => Y::Map(
            fields
                .iter()
                .map(|(k, t)| (k.clone(), template(t)))
                .collect(),
        ),
    }
}

/// A duration in ISO 8601, to the millisecond: `PT1H30M`, `PT0.25S`, `PT0S`.
fn duration(d: Duration) -> Y {
    let ms = d.as_millis();
    let (h, m, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::from("PT");
    if h > 0 {
        out.push_str(&format!("{h}H"));
    }
    if m > 0 {
        out.push_str(&format!("{m}M"));
    }
    if s > 0 || milli > 0 || out == "PT" {
        if milli > 0 {
            out.push_str(&format!("{s}.{milli:03}S"));
        } else {
            out.push_str(&format!("{s}S"));
        }
    }
    text(&out)
}

fn var(name: &str) -> Y {
    text(name.trim_start_matches('$'))
}

fn flow(f: Flow, block: &Block) -> Option<Y> {
    match f {
        Flow::Continue => None,
        Flow::Exit => Some(text("exit")),
        Flow::End => Some(text("end")),
        Flow::Goto(i) => block.tasks.get(i).map(|t| text(&t.name)),
    }
}

fn block(b: &Block) -> Y {
    Y::Seq(
        b.tasks
            .iter()
            .map(|t| Y::Map(vec![(t.name.clone(), task(t, b))]))
            .collect(),
    )
}

fn task(t: &Task, within: &Block) -> Y {
    let mut fields: Vec<(String, Y)> = Vec::new();
    if let Some(e) = &t.when {
        fields.push(("if".into(), expr(e)));
    }
    fields.extend(data(
        "input",
        "from",
        t.input_from.as_ref(),
        t.schemas.input.as_ref(),
    ));
    fields.extend(kind(&t.kind, within));
    fields.extend(data(
        "output",
        "as",
        t.output_as.as_ref(),
        t.schemas.output.as_ref(),
    ));
    fields.extend(data(
        "export",
        "as",
        t.export_as.as_ref(),
        t.schemas.export.as_ref(),
    ));
    if let Some(d) = t.timeout {
        fields.push((
            "timeout".into(),
            Y::Map(vec![("after".into(), duration(d))]),
        ));
    }
    let mut ratchet = Vec::new();
    if let Some(tpl) = &t.status {
        ratchet.push(("status".to_string(), template(tpl)));
    }
    if let Some(tpl) = &t.continue_as_new {
        ratchet.push(("continueAsNew".to_string(), template(tpl)));
    }
    if !ratchet.is_empty() {
        fields.push((
            "metadata".into(),
            Y::Map(vec![("ratchet".into(), Y::Map(ratchet))]),
        ));
    }
    if let Some(then) = flow(t.then, within) {
        fields.push(("then".into(), then));
    }
    Y::Map(fields)
}

/// `input`, `output` or `export`: its transformation (`from` or `as`) and its schema.
fn data(
    key: &str,
    inner: &str,
    transform: Option<&Template>,
    schema: Option<&Schema>,
) -> Option<(String, Y)> {
    let mut fields = Vec::new();
    if let Some(t) = transform {
        fields.push((inner.to_string(), template(t)));
    }
    if let Some(s) = schema {
        fields.push((
            "schema".to_string(),
            Y::Map(vec![
                ("format".into(), text("json")),
                ("document".into(), value(&s.document)),
            ]),
        ));
    }
    (!fields.is_empty()).then(|| (key.to_string(), Y::Map(fields)))
}

fn endpoint(e: &Endpoint) -> Y {
    let mut fields = vec![("uri".to_string(), template(&e.uri))];
    if let Some(a) = &e.auth {
        fields.push(("authentication".into(), auth(a)));
    }
    Y::Map(fields)
}

fn auth(a: &Auth) -> Y {
    let user = |scheme: &str, username: &Template, password: &Template| {
        Y::Map(vec![(
            scheme.into(),
            Y::Map(vec![
                ("username".into(), template(username)),
                ("password".into(), template(password)),
            ]),
        )])
    };
    match a {
        Auth::Basic { username, password } => user("basic", username, password),
        Auth::Digest { username, password } => user("digest", username, password),
        Auth::Bearer { token } => Y::Map(vec![(
            "bearer".into(),
            Y::Map(vec![("token".into(), template(token))]),
        )]),
        Auth::Secret { scheme, secret } => Y::Map(vec![(
            scheme.as_str().into(),
            Y::Map(vec![("use".into(), text(secret))]),
        )]),
        Auth::OAuth2(p) => {
            let mut fields = vec![
                ("authority".to_string(), template(&p.authority)),
                ("grant".to_string(), text("client_credentials")),
            ];
            if let Some(t) = &p.token {
                fields.push((
                    "endpoints".into(),
                    Y::Map(vec![("token".into(), template(t))]),
                ));
            }
            let mut client = vec![("id".to_string(), template(&p.client_id))];
            if let Some(s) = &p.client_secret {
                client.push(("secret".into(), template(s)));
            }
            let how = if p.client_basic {
                "client_secret_basic"
            } else {
                "client_secret_post"
            };
            client.push(("authentication".into(), text(how)));
            fields.push(("client".into(), Y::Map(client)));
            for (key, list) in [("scopes", &p.scopes), ("audiences", &p.audiences)] {
                if !list.is_empty() {
                    fields.push((key.into(), Y::Seq(list.iter().map(|s| text(s)).collect())));
                }
            }
            let scheme = if p.oidc { "oidc" } else { "oauth2" };
            Y::Map(vec![(scheme.into(), Y::Map(fields))])
        }
    }
}

fn kind(k: &Kind, within: &Block) -> Vec<(String, Y)> {
    match k {
        Kind::Do(b) => vec![("do".into(), block(b))],
        Kind::Set(t) => vec![("set".into(), template(t))],
        Kind::Switch(cases) => vec![(
            "switch".into(),
            Y::Seq(
                cases
                    .iter()
                    .map(|c| {
                        let mut fields = Vec::new();
                        if let Some(w) = &c.when {
                            fields.push(("when".into(), expr(w)));
                        }
                        // A case goes to a task of the list its switch is in.
                        let then = flow(c.then, within).unwrap_or_else(|| text("continue"));
                        fields.push(("then".into(), then));
                        Y::Map(vec![(c.name.clone(), Y::Map(fields))])
                    })
                    .collect(),
            ),
        )],
        Kind::For {
            each,
            at,
            list,
            while_,
            body,
        } => {
            let mut out = vec![(
                "for".into(),
                Y::Map(vec![
                    ("each".into(), var(each)),
                    ("in".into(), expr(list)),
                    ("at".into(), var(at)),
                ]),
            )];
            if let Some(w) = while_ {
                out.push(("while".into(), expr(w)));
            }
            out.push(("do".into(), block(body)));
            out
        }
        Kind::Fork { compete, branches } => vec![(
            "fork".into(),
            Y::Map(vec![
                ("compete".into(), Y::Scalar(compete.to_string())),
                ("branches".into(), block(branches)),
            ]),
        )],
        Kind::Function { name, with } => {
            let mut out = vec![("call".into(), text(name))];
            if let Some(t) = with {
                out.push(("with".into(), template(t)));
            }
            out
        }
        Kind::Call { activity, with } => {
            let mut out = vec![("call".into(), text(activity))];
            if let Some(t) = with {
                out.push(("with".into(), template(t)));
            }
            out
        }
        Kind::Http(c) => {
            let mut with = vec![
                ("method".to_string(), template(&c.method)),
                ("endpoint".to_string(), endpoint(&c.endpoint)),
            ];
            for (key, part) in [
                ("headers", &c.headers),
                ("query", &c.query),
                ("body", &c.body),
            ] {
                if let Some(t) = part {
                    with.push((key.to_string(), template(t)));
                }
            }
            with.push(("output".into(), text(c.output.as_str())));
            with.push(("redirect".into(), Y::Scalar(c.redirect.to_string())));
            vec![("call".into(), text("http")), ("with".into(), Y::Map(with))]
        }
        Kind::OpenApi(c) => {
            let mut with = vec![
                (
                    "document".to_string(),
                    Y::Map(vec![("endpoint".into(), endpoint(&c.document))]),
                ),
                ("operationId".to_string(), text(&c.operation)),
            ];
            if let Some(t) = &c.parameters {
                with.push(("parameters".into(), template(t)));
            }
            if let Some(a) = &c.auth {
                with.push(("authentication".into(), auth(a)));
            }
            with.push(("output".into(), text(c.output.as_str())));
            with.push(("redirect".into(), Y::Scalar(c.redirect.to_string())));
            vec![
                ("call".into(), text("openapi")),
                ("with".into(), Y::Map(with)),
            ]
        }
        Kind::Grpc(c) => {
            let mut service = vec![
                ("name".to_string(), text(&c.service)),
                ("host".to_string(), template(&c.host)),
            ];
            if let Some(p) = &c.port {
                service.push(("port".into(), template(p)));
            }
            if let Some(a) = &c.auth {
                service.push(("authentication".into(), auth(a)));
            }
            let mut with = vec![
                (
                    "proto".to_string(),
                    Y::Map(vec![("endpoint".into(), endpoint(&c.proto))]),
                ),
                ("service".to_string(), Y::Map(service)),
                ("method".to_string(), text(&c.method)),
            ];
            if let Some(t) = &c.arguments {
                with.push(("arguments".into(), template(t)));
            }
            vec![("call".into(), text("grpc")), ("with".into(), Y::Map(with))]
        }
        Kind::Wait(d) => vec![("wait".into(), duration(*d))],
        Kind::Listen { signal } => vec![(
            "listen".into(),
            Y::Map(vec![(
                "to".into(),
                Y::Map(vec![(
                    "one".into(),
                    Y::Map(vec![(
                        "with".into(),
                        Y::Map(vec![("type".into(), text(signal))]),
                    )]),
                )]),
            )]),
        )],
        Kind::ListenMany {
            all,
            filters,
            data_only,
            one,
            until,
        } => {
            let mut to = match (one, filters.as_slice()) {
                (true, [f]) => vec![("one".to_string(), filter(f))],
                _ => {
                    let strategy = if *all { "all" } else { "any" };
                    vec![(
                        strategy.to_string(),
                        Y::Seq(filters.iter().map(filter).collect()),
                    )]
                }
            };
            match until {
                Some(crate::model::Until::Holds(e)) => to.push(("until".into(), expr(e))),
                Some(crate::model::Until::Event(ending)) => to.push((
                    "until".into(),
                    Y::Map(vec![(
                        "any".into(),
                        Y::Seq(ending.iter().map(filter).collect()),
                    )]),
                )),
                None => {}
            }
            let mut listen = vec![("to".to_string(), Y::Map(to))];
            if !one {
                listen.push((
                    "read".into(),
                    text(if *data_only { "data" } else { "envelope" }),
                ));
            }
            vec![("listen".into(), Y::Map(listen))]
        }
        Kind::Emit(t) => vec![(
            "emit".into(),
            Y::Map(vec![(
                "event".into(),
                Y::Map(vec![("with".into(), template(t))]),
            )]),
        )],
        Kind::Raise(e) => vec![("raise".into(), Y::Map(vec![("error".into(), error(e))]))],
        Kind::Try { body, catch: c } => {
            vec![("try".into(), block(body)), ("catch".into(), catch(c))]
        }
        Kind::Process(p) => {
            let mut process = Vec::new();
            let key = match p.kind {
                crate::process::ProcessKind::Shell => {
                    process.push(("command".to_string(), template(&p.code)));
                    "shell"
                }
                kind => {
                    let language = if kind == crate::process::ProcessKind::Python {
                        "python"
                    } else {
                        "js"
                    };
                    process.push(("language".to_string(), text(language)));
                    process.push(("code".to_string(), template(&p.code)));
                    "script"
                }
            };
            for (name, t) in [
                ("arguments", &p.arguments),
                ("environment", &p.environment),
                ("stdin", &p.stdin),
            ] {
                if let Some(t) = t {
                    process.push((name.to_string(), template(t)));
                }
            }
            let mut run = vec![(key.to_string(), Y::Map(process))];
            let output = match p.output {
                crate::model::ProcessOutput::Stdout => None,
                crate::model::ProcessOutput::Stderr => Some("stderr"),
                crate::model::ProcessOutput::Code => Some("code"),
                crate::model::ProcessOutput::All => Some("all"),
                crate::model::ProcessOutput::None => Some("none"),
            };
            if let Some(o) = output {
                run.push(("return".into(), text(o)));
            }
            if !p.wait {
                run.push(("await".into(), Y::Scalar("false".into())));
            }
            vec![("run".into(), Y::Map(run))]
        }
        Kind::Run {
            target: (namespace, name, version),
            input,
            ..
        } => vec![(
            "run".into(),
            Y::Map(vec![(
                "workflow".into(),
                Y::Map(vec![
                    ("namespace".into(), text(namespace)),
                    ("name".into(), text(name)),
                    ("version".into(), text(version)),
                    ("input".into(), template(input)),
                ]),
            )]),
        )],
    }
}

fn error(e: &ErrorTemplate) -> Y {
    let mut fields = vec![
        ("type".into(), template(&e.kind)),
        ("status".into(), template(&e.status)),
    ];
    if let Some(t) = &e.title {
        fields.push(("title".into(), template(t)));
    }
    if let Some(t) = &e.detail {
        fields.push(("detail".into(), template(t)));
    }
    Y::Map(fields)
}

fn catch(c: &Catch) -> Y {
    let mut fields = Vec::new();
    if !c.with.is_empty() {
        fields.push((
            "errors".into(),
            Y::Map(vec![(
                "with".into(),
                Y::Map(c.with.iter().map(|(k, v)| (k.clone(), value(v))).collect()),
            )]),
        ));
    }
    fields.push(("as".into(), var(&c.var)));
    if let Some(w) = &c.when {
        fields.push(("when".into(), expr(w)));
    }
    if let Some(w) = &c.except_when {
        fields.push(("exceptWhen".into(), expr(w)));
    }
    if let Some(r) = &c.retry {
        fields.push(("retry".into(), retry(r)));
    }
    if let Some(b) = &c.body {
        fields.push(("do".into(), block(b)));
    }
    Y::Map(fields)
}

fn retry(r: &Retry) -> Y {
    let backoff = r.backoff.as_str();
    let mut fields = Vec::new();
    if let Some(w) = &r.when {
        fields.push(("when".into(), expr(w)));
    }
    if let Some(w) = &r.except_when {
        fields.push(("exceptWhen".into(), expr(w)));
    }
    fields.push(("delay".into(), duration(r.delay)));
    fields.push((
        "backoff".into(),
        Y::Map(vec![(backoff.into(), Y::Map(Vec::new()))]),
    ));
    let mut attempt = Vec::new();
    if r.attempts != u32::MAX || r.limit.is_none() {
        attempt.push(("count".into(), Y::Scalar(r.attempts.to_string())));
    }
    if let Some(d) = r.attempt_limit {
        attempt.push(("duration".into(), duration(d)));
    }
    let mut limit = Vec::new();
    if !attempt.is_empty() {
        limit.push(("attempt".into(), Y::Map(attempt)));
    }
    if let Some(d) = r.limit {
        limit.push(("duration".into(), duration(d)));
    }
    fields.push(("limit".into(), Y::Map(limit)));
    if let Some((from, to)) = r.jitter {
        fields.push((
            "jitter".into(),
            Y::Map(vec![
                ("from".into(), duration(from)),
                ("to".into(), duration(to)),
            ]),
        ));
    }
    Y::Map(fields)
}

/// A mapping key: plain when YAML reads it back as the same string, else quoted.
fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    if plain {
        k.to_string()
    } else {
        serde_json::to_string(k).unwrap_or_default()
    }
}

fn write(out: &mut String, y: &Y, indent: usize) {
    let pad = " ".repeat(indent);
    match y {
        Y::Scalar(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Y::Map(fields) if fields.is_empty() => out.push_str("{}\n"),
        Y::Seq(items) if items.is_empty() => out.push_str("[]\n"),
        Y::Map(fields) => {
            for (i, (k, v)) in fields.iter().enumerate() {
                // The first field follows a `- ` or a key's line already.
                if i > 0 || !out.ends_with("- ") {
                    out.push_str(&pad);
                }
                out.push_str(&key(k));
                out.push(':');
                match v {
                    Y::Scalar(_) => out.push(' '),
                    Y::Map(f) if f.is_empty() => out.push(' '),
                    Y::Seq(s) if s.is_empty() => out.push(' '),
                    _ => out.push('\n'),
                }
                write(out, v, indent + 2);
            }
        }
        Y::Seq(items) => {
            for item in items {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Y::Map(f) if !f.is_empty() => write(out, item, indent + 2),
                    Y::Seq(s) if !s.is_empty() => {
                        out.push('\n');
                        write(out, item, indent + 2);
                    }
                    _ => write(out, item, indent + 2),
                }
            }
        }
    }
}

impl Workflow {
    /// The definition as canonical YAML: compiling it gives this same workflow back.
    pub fn decompile(&self) -> String {
        let mut top = vec![(
            "document".to_string(),
            Y::Map(vec![
                ("dsl".into(), text("1.0.0")),
                ("namespace".into(), text(&self.namespace)),
                ("name".into(), text(&self.name)),
                ("version".into(), text(&self.version)),
            ]),
        )];
        top.extend(data(
            "input",
            "from",
            self.input_from.as_ref(),
            self.schemas.input.as_ref(),
        ));
        let mut uses = Vec::new();
        if !self.secrets.is_empty() {
            let secrets = self.secrets.iter().map(|s| text(s)).collect();
            uses.push(("secrets".to_string(), Y::Seq(secrets)));
        }
        if !self.functions.is_empty() {
            let alone = Block::default();
            let functions = self
                .functions
                .iter()
                .map(|(name, t)| (name.clone(), task(t, &alone)))
                .collect();
            uses.push(("functions".to_string(), Y::Map(functions)));
        }
        if !uses.is_empty() {
            top.push(("use".into(), Y::Map(uses)));
        }
        if let Some(d) = self.timeout {
            top.push((
                "timeout".into(),
                Y::Map(vec![("after".into(), duration(d))]),
            ));
        }
        if let Some(s) = &self.schedule {
            let (key, value) = match s {
                crate::DslSchedule::Every(d) => ("every", duration(*d)),
                crate::DslSchedule::After(d) => ("after", duration(*d)),
                crate::DslSchedule::Cron(c) => ("cron", text(c)),
                crate::DslSchedule::On(t) => {
                    // The strategy, as a `listen` task would write it under `to`.
                    let to = kind(&t.0.kind, &Block::default())
                        .into_iter()
                        .find_map(|(_, listen)| match listen {
                            Y::Map(items) => items.into_iter().find(|(k, _)| k == "to"),
                            _ => None,
                        })
                        .map_or(Y::Map(Vec::new()), |(_, to)| to);
                    ("on", to)
                }
            };
            top.push(("schedule".into(), Y::Map(vec![(key.into(), value)])));
        }
        top.push(("do".into(), block(&self.body)));
        top.extend(data(
            "output",
            "as",
            self.output_as.as_ref(),
            self.schemas.output.as_ref(),
        ));
        let mut out = String::new();
        write(&mut out, &Y::Map(top), 0);
        out
    }
}
