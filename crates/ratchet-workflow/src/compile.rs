//! The compiler: DSL source (YAML or JSON) to a [`Workflow`], or every error at once with its
//! line and column.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode};
use marked_yaml::{Node, Span};
use serde_json::Value;

use crate::diagnostic::{CompileError, CompileErrors};
use crate::expr::{self, Expr};
use crate::model::{
    Auth, Backoff, Block, CallOutput, Case, Catch, Endpoint, ErrorTemplate, EventFilter, Filter,
    Flow, GrpcCall, HttpCall, Kind, OAuth2Policy, OpenApiCall, ProcessCall, ProcessOutput, Retry,
    Schema, Schemas, Scheme, Task, Template, Until,
};
use crate::process::ProcessKind;
use crate::Workflow;

/// What the compiler checks names against, when it knows them (a registry): an unknown
/// activity or sub-workflow is then an error at compile time, not at run time.
#[derive(Clone, Debug, Default)]
pub struct Known {
    /// Activities a worker runs.
    pub activities: Option<BTreeSet<String>>,
    /// Orchestrations (Rust or declarative) a worker runs.
    pub orchestrations: Option<BTreeSet<String>>,
}

/// The variables every expression sees.
const BASE_VARS: [&str; 3] = ["$input", "$context", "$workflow"];

/// Task kinds of the DSL, the one key that says what a task is.
const KINDS: [&str; 12] = [
    "call", "do", "emit", "for", "fork", "listen", "raise", "run", "set", "switch", "try", "wait",
];

/// Keys every task may have besides its kind's own.
const COMMON: [&str; 7] = [
    "if", "input", "output", "export", "timeout", "then", "metadata",
];

/// `call:` targets of the DSL that are protocols, not Ratchet activities.
const PROTOCOLS: [&str; 6] = ["http", "grpc", "openapi", "asyncapi", "a2a", "mcp"];

fn at(span: &Span) -> (usize, usize) {
    span.start().map_or((0, 0), |m| (m.line(), m.column()))
}

/// Where a mapping is, for an error about what it lacks: its first key (the mapping's own
/// span starts after it).
fn place(map: &MarkedMappingNode) -> &Span {
    map.keys().next().map_or(map.span(), |k| k.span())
}

struct Cx<'k> {
    errors: Vec<CompileError>,
    known: &'k Known,
    /// `use.secrets`: the secrets the workflow may name.
    secrets: BTreeSet<String>,
    /// `use.authentications`, by name.
    authentications: BTreeMap<String, Auth>,
    /// `use.functions`, by name.
    functions: BTreeMap<String, Task>,
    /// `use.errors`, `use.retries` and `use.timeouts`, by name.
    named_errors: BTreeMap<String, ErrorTemplate>,
    retries: BTreeMap<String, Retry>,
    timeouts: BTreeMap<String, Duration>,
}

impl Cx<'_> {
    fn error(&mut self, span: &Span, message: impl Into<String>) {
        let (line, column) = at(span);
        self.errors
            .push(CompileError::new(line, column, message.into()));
    }

    fn mapping<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n MarkedMappingNode> {
        let found = node.as_mapping();
        if found.is_none() {
            self.error(node.span(), format!("{what} must be a mapping"));
        }
        found
    }

    fn text<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n str> {
        let found = node.as_scalar().map(|s| s.as_str());
        if found.is_none() {
            self.error(node.span(), format!("{what} must be a string"));
        }
        found
    }

    /// Refuses keys of `map` outside `allowed`, naming them and where they are.
    fn only(&mut self, map: &MarkedMappingNode, allowed: &[&str], what: &str) {
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                self.error(
                    key.span(),
                    format!(
                        "{what}: unknown field `{}` (expected one of: {})",
                        key.as_str(),
                        allowed.join(", ")
                    ),
                );
            }
        }
    }

    /// The field `key` of `map`; when it is missing, an error at `map`: "`what` has no
    /// `key`".
    fn required<'n>(
        &mut self,
        map: &'n MarkedMappingNode,
        key: &str,
        what: &str,
    ) -> Option<&'n Node> {
        let found = map.get_node(key);
        if found.is_none() {
            self.error(place(map), format!("{what} has no `{key}`"));
        }
        found
    }

    /// A data transformation: `input.from`, `output.as` or `export.as` of the mapping `of`
    /// (`what` names its task; empty for the workflow's own).
    fn transform(
        &mut self,
        of: &MarkedMappingNode,
        (key, inner): (&str, &str),
        scope: &[String],
        what: &str,
    ) -> Option<Template> {
        let prefix = if what.is_empty() {
            String::new()
        } else {
            format!("{what}: ")
        };
        let label = format!("{prefix}`{key}`");
        let m = self.mapping(of.get_node(key)?, &label)?;
        let allowed = [inner, "schema"];
        self.only(m, &allowed, &label);
        let node = m.get_node(inner)?;
        let what = format!("{prefix}{key}.{inner}");
        // A string here is a runtime expression, with or without `${ }` (`from: .order.pet`);
        // a mapping or list is a value with expressions inside.
        match node {
            Node::Scalar(s) if !s.may_coerce_literal() => {
                self.expr(node, scope, &what).map(Template::Expr)
            }
            _ => Some(self.template(node, scope, &what)),
        }
    }

    /// The `input.schema`, `output.schema` and `export.schema` of the mapping `of`.
    fn schemas(&mut self, of: &MarkedMappingNode, what: &str) -> Schemas {
        let mut one = |key: &str| {
            let node = of.get_node(key)?.as_mapping()?.get_node("schema")?;
            let at = if what.is_empty() {
                format!("{key}.schema")
            } else {
                format!("{what}: {key}.schema")
            };
            self.schema(node, &at)
        };
        Schemas {
            input: one("input"),
            output: one("output"),
            export: one("export"),
        }
    }

    /// A schema definition: `{format: json, document: {...}}`, compiled. Patterns run on the
    /// `regex` crate (linear time), and nothing is fetched: a `$ref` elsewhere is refused.
    fn schema(&mut self, node: &Node, what: &str) -> Option<Schema> {
        let m = self.mapping(node, what)?;
        self.only(m, &["format", "document", "resource"], what);
        if let Some(r) = m.keys().find(|k| k.as_str() == "resource") {
            self.error(
                r.span(),
                format!("{what}: a schema from a resource (fetched) is not supported by Ratchet yet; give its `document`"),
            );
            return None;
        }
        if let Some(f) = m.get_node("format") {
            let format = self.text(f, &format!("{what}.format"))?;
            if !matches!(format, "json" | "json:2020-12" | "json-schema") {
                self.error(
                    f.span(),
                    format!("{what}: the schema format `{format}` is not supported by Ratchet (json is)"),
                );
                return None;
            }
        }
        let Some(doc) = m.get_node("document") else {
            self.error(place(m), format!("{what} has no `document`"));
            return None;
        };
        let document = literal(doc);
        let built = jsonschema::options()
            .should_validate_formats(false)
            .with_pattern_options(jsonschema::PatternOptions::regex())
            .build(&document);
        match built {
            Ok(v) => Some(Schema {
                document,
                validator: std::sync::Arc::new(v),
            }),
            Err(e) => {
                self.error(
                    doc.span(),
                    format!("{what}: not a JSON Schema Ratchet can use: {e}"),
                );
                None
            }
        }
    }

    /// An expression: `${ code }`, or (where the DSL takes only expressions) plain code.
    fn expr(&mut self, node: &Node, scope: &[String], what: &str) -> Option<Expr> {
        let text = self.text(node, what)?;
        let code = expr::strip(text).unwrap_or(text);
        match Expr::compile(code, scope) {
            Ok(e) => Some(e),
            Err(message) => {
                self.error(node.span(), format!("{what}: {message}"));
                None
            }
        }
    }

    /// A value that may hold expressions anywhere inside.
    fn template(&mut self, node: &Node, scope: &[String], what: &str) -> Template {
        let built = match node {
            Node::Scalar(s) => match expr::strip(s.as_str()).filter(|_| !s.may_coerce_literal()) {
                Some(code) => match Expr::compile(code, scope) {
                    Ok(e) => return Template::Expr(e),
                    Err(message) => {
                        self.error(s.span(), format!("{what}: {message}"));
                        return Template::Literal(Value::Null);
                    }
                },
                None => return Template::Literal(scalar(s)),
            },
            Node::Sequence(items) => Template::Array(
                items
                    .iter()
                    .map(|n| self.template(n, scope, what))
                    .collect(),
            ),
            Node::Mapping(map) => Template::Object(
                map.iter()
                    .map(|(k, v)| (k.as_str().to_string(), self.template(v, scope, what)))
                    .collect(),
            ),
        };
        // Without an expression inside, the value is known now.
        match literal_of(&built) {
            Some(v) => Template::Literal(v),
            None => built,
        }
    }

    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        let d = self.any_duration(node, what)?;
        if d > ratchet_core::limits::MAX_DURATION {
            self.error(
                node.span(),
                format!("{what}: a duration is at most 100 years (36525 days)"),
            );
            return None;
        }
        Some(d)
    }

    fn any_duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        match node {
            Node::Scalar(s) => match iso8601::duration(s.as_str()) {
                Ok(d) => Some(d.into()),
                Err(_) => {
                    self.error(
                        s.span(),
                        format!(
                            "{what}: `{}` is not a duration (ISO 8601 such as PT30S, or \
                             {{minutes: 5}})",
                            s.as_str()
                        ),
                    );
                    None
                }
            },
            Node::Mapping(map) => {
                const UNITS: [(&str, u64); 5] = [
                    ("days", 86_400_000),
                    ("hours", 3_600_000),
                    ("minutes", 60_000),
                    ("seconds", 1_000),
                    ("milliseconds", 1),
                ];
                let names: Vec<&str> = UNITS.iter().map(|(n, _)| *n).collect();
                self.only(map, &names, what);
                let mut ms: u64 = 0;
                for (key, value) in map.iter() {
                    let Some((_, unit)) = UNITS.iter().find(|(n, _)| *n == key.as_str()) else {
                        continue;
                    };
                    match value.as_scalar().and_then(|s| s.as_u64()) {
                        Some(n) => ms = ms.saturating_add(n.saturating_mul(*unit)),
                        None => self.error(
                            value.span(),
                            format!("{what}: `{}` must be a whole number", key.as_str()),
                        ),
                    }
                }
                Some(Duration::from_millis(ms))
            }
            Node::Sequence(s) => {
                self.error(s.span(), format!("{what} must be a duration"));
                None
            }
        }
    }
}

trait ScalarExt {
    /// A plain scalar YAML reads as a number, boolean or null: never an expression.
    fn may_coerce_literal(&self) -> bool;
}

impl ScalarExt for MarkedScalarNode {
    fn may_coerce_literal(&self) -> bool {
        self.may_coerce() && !matches!(scalar(self), Value::String(_))
    }
}

/// A scalar as YAML types it: a plain `true`, `12`, `1.5` or `null` is not a string.
fn scalar(s: &MarkedScalarNode) -> Value {
    if s.may_coerce() {
        if let Some(b) = s.as_bool() {
            return Value::Bool(b);
        }
        if matches!(s.as_str(), "null" | "Null" | "NULL" | "~" | "") {
            return Value::Null;
        }
        if let Some(i) = s.as_i64() {
            return Value::from(i);
        }
        if let Some(n) = s.as_f64().and_then(serde_json::Number::from_f64) {
            return Value::Number(n);
        }
    }
    Value::String(s.as_str().to_string())
}

/// A node as plain JSON.
pub(crate) fn literal(node: &Node) -> Value {
    match node {
        Node::Scalar(s) => scalar(s),
        Node::Sequence(items) => Value::Array(items.iter().map(literal).collect()),
        Node::Mapping(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.as_str().to_string(), literal(v)))
                .collect(),
        ),
    }
}

fn literal_of(t: &Template) -> Option<Value> {
    match t {
        Template::Literal(v) => Some(v.clone()),
        Template::Expr(_) => None,
        Template::Array(items) => items
            .iter()
            .map(literal_of)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        Template::Object(fields) => fields
            .iter()
            .map(|(k, v)| literal_of(v).map(|v| (k.clone(), v)))
            .collect::<Option<serde_json::Map<_, _>>>()
            .map(Value::Object),
    }
}

/// The longest definition, in bytes.
pub const MAX_DEFINITION_BYTES: usize = 1 << 20;

/// How deeply a definition's YAML (or JSON) may nest, at most.
pub const MAX_DEFINITION_NESTING: usize = ratchet_core::limits::MAX_JSON_DEPTH;

/// Checks a definition's size and nesting before anything recursive reads it: YAML is read
/// by a recursive loader, then walked to JSON, by the schema and by the compiler, and a
/// line of a thousand `- ` (or a staircase of keys) would overflow any of them. The parser's
/// events are read here one by one, which takes no stack.
fn check_shape(source: &str) -> Result<(), CompileError> {
    if source.len() > MAX_DEFINITION_BYTES {
        return Err(CompileError::new(
            0,
            0,
            format!(
                "a definition may be at most {MAX_DEFINITION_BYTES} bytes, this one is {}",
                source.len()
            ),
        ));
    }
    match too_deep(source) {
        None => Ok(()),
        Some((line, column)) => Err(CompileError::new(
            line,
            column,
            format!(
                "a definition may nest at most {MAX_DEFINITION_NESTING} levels; this one goes deeper here"
            ),
        )),
    }
}

/// Where YAML (or JSON) text nests deeper than [`MAX_DEFINITION_NESTING`], if it does,
/// read from the parser's events.
fn too_deep(source: &str) -> Option<(usize, usize)> {
    use yaml_rust2::parser::{Event, Parser};
    let mut parser = Parser::new_from_str(source);
    let mut depth = 0_usize;
    loop {
        match parser.next_token() {
            // The loader reports what does not parse, with its position.
            Err(_) | Ok((Event::StreamEnd, _)) => return None,
            Ok((Event::SequenceStart(..) | Event::MappingStart(..), mark)) => {
                depth += 1;
                if depth > MAX_DEFINITION_NESTING {
                    return Some((mark.line(), mark.col() + 1));
                }
            }
            Ok((Event::SequenceEnd | Event::MappingEnd, _)) => depth = depth.saturating_sub(1),
            Ok(_) => {}
        }
    }
}

/// YAML text that is not a definition (an OpenAPI document), read within the same nesting
/// limit.
pub(crate) fn parse_document(text: &str) -> Result<Value, String> {
    if let Some((line, column)) = too_deep(text) {
        return Err(format!(
            "it nests deeper than {MAX_DEFINITION_NESTING} levels (line {line}, column {column})"
        ));
    }
    parse(text)
        .map(|node| literal(&node))
        .map_err(|e| load_error(&e).2)
}

/// Compiles a definition.
pub(crate) fn compile(source: &str, known: &Known) -> Result<Workflow, CompileErrors> {
    check_shape(source).map_err(|e| CompileErrors(vec![e]))?;
    let root = parse(source).map_err(|e| {
        let (line, column, message) = load_error(&e);
        CompileErrors(vec![CompileError::new(line, column, message)])
    })?;
    let mut cx = Cx {
        errors: Vec::new(),
        known,
        secrets: BTreeSet::new(),
        authentications: BTreeMap::new(),
        functions: BTreeMap::new(),
        named_errors: BTreeMap::new(),
        retries: BTreeMap::new(),
        timeouts: BTreeMap::new(),
    };
    let workflow = workflow(&mut cx, &root, source);
    let mut errors = cx.errors;
    // The DSL's schema, for what Ratchet's own rules do not say: where one of them already
    // points inside the part a schema error is about, that one says it better.
    for (error, last) in crate::schema::check(&root) {
        let covered = errors
            .iter()
            .any(|e| e.line >= error.line && e.line <= last.max(error.line));
        if !covered {
            errors.push(error);
        }
    }
    errors.sort_by_key(|e| (e.line, e.column));
    match workflow {
        Some(w) if errors.is_empty() => Ok(w),
        _ => Err(CompileErrors(errors)),
    }
}

/// YAML as YAML types it: only a plain scalar may read as a number, boolean or null (a quoted
/// `'12'` is a string), and a key given twice is an error, not the last one silently.
pub(crate) fn parse(source: &str) -> Result<Node, marked_yaml::LoadError> {
    let options = marked_yaml::LoaderOptions::default()
        .prevent_coercion(true)
        .error_on_duplicate_keys(true);
    marked_yaml::parse_yaml_with_options(0, source, options)
}

fn load_error(e: &marked_yaml::LoadError) -> (usize, usize, String) {
    use marked_yaml::LoadError as E;
    let (marker, message) = match e {
        E::TopLevelMustBeMapping(m) => (
            Some(*m),
            "a workflow is a mapping (document, do, ...)".to_string(),
        ),
        E::ScanError(m, scan) => (Some(*m), format!("not YAML or JSON: {scan}")),
        E::DuplicateKey(inner) => (
            inner.prev_key.span().start().copied(),
            format!("`{}` appears twice", inner.key.as_str()),
        ),
        other => (None, format!("cannot read the definition: {other}")),
    };
    let (line, column) = marker.map_or((0, 0), |m| (m.line(), m.column()));
    (line, column, message)
}

fn workflow(cx: &mut Cx<'_>, root: &Node, source: &str) -> Option<Workflow> {
    let map = cx.mapping(root, "the workflow")?;
    cx.only(
        map,
        &[
            "document", "input", "output", "do", "use", "timeout", "schedule", "evaluate",
        ],
        "the workflow",
    );
    for unsupported in ["evaluate"] {
        if let Some(key) = map.keys().find(|k| k.as_str() == unsupported) {
            cx.error(
                key.span(),
                format!("`{unsupported}` at the top of a workflow is not supported by Ratchet yet"),
            );
        }
    }
    let document = match map.get_node("document") {
        Some(node) => document(cx, node),
        None => {
            cx.error(
                place(map),
                "the workflow has no `document` (dsl, namespace, name, version)",
            );
            None
        }
    };
    let scope: Vec<String> = BASE_VARS.iter().map(|v| v.to_string()).collect();
    if let Some(node) = map.get_node("use") {
        uses(cx, node, &scope);
    }
    let input_from = cx.transform(map, ("input", "from"), &scope, "");
    let output_as = cx.transform(map, ("output", "as"), &scope, "");
    let schemas = cx.schemas(map, "");
    let body = match map.get_node("do") {
        Some(node) => block(cx, node, &scope, "the workflow's `do`", "/do"),
        None => {
            cx.error(place(map), "the workflow has no `do`: the tasks it runs");
            None
        }
    };
    let schedule = match map.get_node("schedule") {
        Some(node) => Some(schedule(cx, node)?),
        None => None,
    };
    let timeout = map
        .get_node("timeout")
        .and_then(|n| timeout(cx, n, "the workflow's `timeout`"));
    let (namespace, name, version) = document?;
    Some(Workflow {
        namespace,
        name,
        version,
        hash: crate::content_hash(source),
        input_from,
        output_as,
        schemas,
        body: body?,
        schedule,
        timeout,
        secrets: cx.secrets.iter().cloned().collect(),
        functions: std::mem::take(&mut cx.functions),
    })
}

/// The workflow's own `schedule`: one of `every`, `cron`, `after` or `on` (events of the
/// store that start it).
fn schedule(cx: &mut Cx<'_>, node: &Node) -> Option<crate::DslSchedule> {
    let map = cx.mapping(node, "`schedule`")?;
    cx.only(map, &["every", "cron", "after", "on"], "`schedule`");
    let given: Vec<&str> = ["every", "cron", "after", "on"]
        .into_iter()
        .filter(|k| map.get_node(k).is_some())
        .collect();
    if given.len() != 1 {
        cx.error(
            place(map),
            "`schedule` takes one of `every`, `cron`, `after` or `on`",
        );
        return None;
    }
    if let Some(on) = map.get_node("on") {
        let on = cx.mapping(on, "`schedule.on`")?;
        let kind = strategy(cx, "`schedule.on`", on, None, &[], true)?;
        return Some(crate::DslSchedule::On(crate::Trigger(Box::new(Task {
            name: "schedule.on".into(),
            path: "/schedule/on".into(),
            when: None,
            input_from: None,
            output_as: None,
            export_as: None,
            schemas: Schemas::default(),
            timeout: None,
            status: None,
            continue_as_new: None,
            then: Flow::Continue,
            kind,
        }))));
    }
    let key = given[0];
    let value = map.get_node(key)?;
    let whole_seconds = |cx: &mut Cx<'_>, d: Duration| {
        if d.as_millis() < 1_000 || !d.as_millis().is_multiple_of(1_000) {
            cx.error(
                value.span(),
                format!("`schedule.{key}` must be a whole number of seconds, at least one"),
            );
            return None;
        }
        Some(d)
    };
    match key {
        "every" => {
            let d = cx.duration(value, "`schedule.every`")?;
            whole_seconds(cx, d).map(crate::DslSchedule::Every)
        }
        "after" => {
            let d = cx.duration(value, "`schedule.after`")?;
            whole_seconds(cx, d).map(crate::DslSchedule::After)
        }
        _ => {
            let expression = cx.text(value, "`schedule.cron`")?.trim().to_string();
            if expression.starts_with("every ") || expression.starts_with("after ") {
                cx.error(value.span(), "`schedule.cron` must be a cron expression");
                return None;
            }
            match expression.parse::<ratchet_schedule::Spec>() {
                Ok(_) => Some(crate::DslSchedule::Cron(expression)),
                Err(e) => {
                    cx.error(value.span(), format!("`schedule.cron`: {}", e.message));
                    None
                }
            }
        }
    }
}

fn document(cx: &mut Cx<'_>, node: &Node) -> Option<(String, String, String)> {
    let map = cx.mapping(node, "`document`")?;
    cx.only(
        map,
        &[
            "dsl",
            "namespace",
            "name",
            "version",
            "title",
            "summary",
            "tags",
            "metadata",
        ],
        "`document`",
    );
    let mut field = |key: &str| -> Option<String> {
        match map.get_node(key) {
            Some(n) => cx.text(n, &format!("document.{key}")).map(str::to_string),
            None => {
                cx.error(place(map), format!("`document` has no `{key}`"));
                None
            }
        }
    };
    let dsl = field("dsl");
    let namespace = field("namespace");
    let name = field("name");
    let version = field("version");
    if let (Some(dsl), Some(node)) = (&dsl, map.get_node("dsl")) {
        if !dsl.starts_with("1.") {
            cx.error(
                node.span(),
                format!(
                    "DSL version {dsl}: Ratchet runs version 1.0 of the Serverless Workflow DSL"
                ),
            );
        }
    }
    Some((namespace?, name?, version?))
}

/// A task list: each item a mapping of one task name to its definition.
/// A task list; `path` is where it is (a JSON Pointer), for its tasks' paths.
fn block(cx: &mut Cx<'_>, node: &Node, scope: &[String], what: &str, path: &str) -> Option<Block> {
    let Some(items) = node.as_sequence() else {
        cx.error(
            node.span(),
            format!("{what} must be a list of tasks (`- name: {{...}}`)"),
        );
        return None;
    };
    if items.is_empty() {
        cx.error(node.span(), format!("{what} has no task"));
        return None;
    }
    let mut tasks = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut thens: Vec<Thens> = Vec::new();
    let mut spans = Vec::new();
    let mut ok = true;
    for item in items.iter() {
        let Some(map) = item.as_mapping().filter(|m| m.len() == 1) else {
            cx.error(
                item.span(),
                format!("each item of {what} is one task: `- name: {{...}}`"),
            );
            ok = false;
            continue;
        };
        let Some((key, def)) = map.iter().next() else {
            continue;
        };
        let name = key.as_str().to_string();
        if let Some(_first) = names.get(&name) {
            cx.error(key.span(), format!("two tasks named `{name}` in {what}"));
        }
        names.insert(name.clone(), tasks.len());
        let at = format!("{path}/{}/{}", tasks.len(), pointer_token(&name));
        let (t, then, case_thens) = task(cx, &name, def, scope, &at).unwrap_or_else(|| {
            // Kept in its place, so the flow of the others is still checked.
            ok = false;
            (placeholder(&name), None, Vec::new())
        });
        tasks.push(t);
        thens.push((then, case_thens));
        spans.push(*key.span());
    }
    // Flow directives name tasks of the same list.
    let resolve = |cx: &mut Cx<'_>, target: &str, span: &Span, from: &str| -> Flow {
        match target {
            "continue" => Flow::Continue,
            "exit" => Flow::Exit,
            "end" => Flow::End,
            name => match names.get(name) {
                Some(i) => Flow::Goto(*i),
                None => {
                    cx.error(
                        span,
                        format!("{from}: `then: {name}` names no task of this list (nor continue, exit, end)"),
                    );
                    Flow::Continue
                }
            },
        }
    };
    for (i, (then, case_thens)) in thens.iter().enumerate() {
        if let Some((target, span)) = then {
            let from = format!("task `{}`", tasks[i].name);
            tasks[i].then = resolve(cx, target, span, &from);
        }
        let task_name = tasks[i].name.clone();
        if let Kind::Switch(cases) = &mut tasks[i].kind {
            for (case, (target, span)) in cases.iter_mut().zip(case_thens) {
                let from = format!("case `{}` of task `{task_name}`", case.name);
                case.then = resolve(cx, target, span, &from);
            }
        }
    }
    // Every task must be reachable from the first.
    let mut reached = vec![false; tasks.len()];
    let mut todo = vec![0];
    while let Some(i) = todo.pop() {
        if i >= tasks.len() || reached[i] {
            continue;
        }
        reached[i] = true;
        let t = &tasks[i];
        let mut next = |flow: Flow| match flow {
            Flow::Continue => todo.push(i + 1),
            Flow::Goto(j) => todo.push(j),
            Flow::Exit | Flow::End => {}
        };
        match &t.kind {
            // A raise never goes on.
            Kind::Raise(_) if t.when.is_none() => {}
            Kind::Switch(cases) => {
                cases.iter().for_each(|c| next(c.then));
                if !cases.iter().any(|c| c.when.is_none()) {
                    next(t.then);
                }
            }
            _ => {
                next(t.then);
                // A task skipped by its `if` goes on to the next.
                if t.when.is_some() {
                    next(Flow::Continue);
                }
            }
        }
    }
    for (i, reached) in reached.iter().enumerate() {
        if !reached {
            cx.error(
                &spans[i],
                format!(
                    "task `{}` is never reached: no task before it goes on to it",
                    tasks[i].name
                ),
            );
        }
    }
    ok.then_some(Block { tasks })
}

/// Stands for a task that did not compile.
fn placeholder(name: &str) -> Task {
    Task {
        name: name.to_string(),
        path: String::new(),
        when: None,
        input_from: None,
        output_as: None,
        export_as: None,
        schemas: Schemas::default(),
        timeout: None,
        status: None,
        continue_as_new: None,
        then: Flow::Continue,
        kind: Kind::Set(Template::Literal(Value::Null)),
    }
}

/// A flow directive as written, where it is written.
type Directive = (String, Span);

/// A task's `then`, and its switch cases' `then`s.
type Thens = (Option<Directive>, Vec<Directive>);

type TaskParts = (Task, Option<Directive>, Vec<Directive>);

/// A name as one token of a JSON Pointer (RFC 6901): `~` and `/` escaped.
fn pointer_token(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn task(
    cx: &mut Cx<'_>,
    name: &str,
    def: &Node,
    scope: &[String],
    path: &str,
) -> Option<TaskParts> {
    let what = format!("task `{name}`");
    let map = cx.mapping(def, &what)?;
    // A `for` task's `do` is its body, not a kind of its own.
    let is_for = map.keys().any(|k| k.as_str() == "for");
    let kinds: Vec<&MarkedScalarNode> = map
        .keys()
        .filter(|k| KINDS.contains(&k.as_str()) && !(is_for && k.as_str() == "do"))
        .collect();
    let kind_key = match kinds.as_slice() {
        [one] => one.as_str().to_string(),
        [] => {
            cx.error(
                place(map),
                format!("{what} does nothing: give it one of {}", KINDS.join(", ")),
            );
            return None;
        }
        [_, second, ..] => {
            cx.error(
                second.span(),
                format!(
                    "{what} is both `{}` and `{}`: a task does one thing",
                    kinds[0].as_str(),
                    second.as_str()
                ),
            );
            return None;
        }
    };
    if kind_key == "listen" {
        if let Some(each) = map.keys().find(|k| k.as_str() == "foreach") {
            cx.error(
                each.span(),
                format!("{what}: `foreach` on a listen (tasks run for each event) is not supported by Ratchet yet"),
            );
        }
    }
    let own: Vec<&str> = match kind_key.as_str() {
        "call" => vec!["call", "with"],
        "listen" => vec!["listen", "foreach"],
        "for" => vec!["for", "while", "do"],
        "try" => vec!["try", "catch"],
        other => vec![other],
    };
    let allowed: Vec<&str> = COMMON.iter().copied().chain(own).collect();
    cx.only(map, &allowed, &what);

    let when = map
        .get_node("if")
        .and_then(|n| cx.expr(n, scope, &format!("{what}: `if`")));
    let input_from = cx.transform(map, ("input", "from"), scope, &what);
    let output_as = cx.transform(map, ("output", "as"), scope, &what);
    let export_as = cx.transform(map, ("export", "as"), scope, &what);
    let schemas = cx.schemas(map, &what);
    let timeout = map
        .get_node("timeout")
        .and_then(|n| timeout(cx, n, &format!("{what}: `timeout`")));
    let (status, continue_as_new) = map
        .get_node("metadata")
        .and_then(|n| cx.mapping(n, &format!("{what}: `metadata`")))
        .and_then(|m| m.get_node("ratchet"))
        .and_then(|n| cx.mapping(n, &format!("{what}: metadata.ratchet")))
        .map(|r| {
            cx.only(
                r,
                &["status", "continueAsNew"],
                &format!("{what}: metadata.ratchet"),
            );
            let status = r
                .get_node("status")
                .map(|n| cx.template(n, scope, &format!("{what}: metadata.ratchet.status")));
            let next = r
                .get_node("continueAsNew")
                .map(|n| cx.template(n, scope, &format!("{what}: metadata.ratchet.continueAsNew")));
            (status, next)
        })
        .unwrap_or_default();
    let then = map.get_node("then").and_then(|n| {
        cx.text(n, &format!("{what}: `then`"))
            .map(|t| (t.to_string(), *n.span()))
    });
    let node = map.get_node(&kind_key)?;
    let mut case_thens = Vec::new();
    let kind = match kind_key.as_str() {
        "do" => Kind::Do(block(
            cx,
            node,
            scope,
            &format!("{what}: `do`"),
            &format!("{path}/do"),
        )?),
        "set" => Kind::Set(cx.template(node, scope, &format!("{what}: `set`"))),
        "wait" => Kind::Wait(cx.duration(node, &format!("{what}: `wait`"))?),
        "call" => call(cx, &what, node, map.get_node("with"), scope)?,
        "switch" => switch(cx, &what, node, scope, &mut case_thens)?,
        "for" => for_each(cx, &what, node, map, scope, path)?,
        "fork" => fork(cx, &what, node, scope, path)?,
        "listen" => listen(cx, &what, node, scope)?,
        "raise" => raise(cx, &what, node, scope)?,
        "try" => try_catch(cx, &what, node, map.get_node("catch"), scope, path)?,
        "run" => run(cx, &what, node, scope)?,
        "emit" => emit(cx, &what, node, scope)?,
        _ => return None,
    };
    // Racing a signal against the store's events leaves the events' follower running when the
    // signal wins, until its deadline: there must be one.
    if let Kind::ListenMany {
        all: false,
        filters,
        until,
        ..
    } = &kind
    {
        let ending = match until {
            Some(Until::Event(more)) => more.as_slice(),
            _ => &[],
        };
        let every = || filters.iter().chain(ending);
        let signals = every().any(|f| matches!(f, Filter::Signal(_)));
        let events = every().any(|f| matches!(f, Filter::Event(_))) || filters.is_empty();
        if signals && events && timeout.is_none() {
            cx.error(
                node.span(),
                format!("{what}: listen.to.any of signals and events needs a `timeout` (a race of signals and events without a timeout is not supported by Ratchet: the store's follower would wait on after a signal won)"),
            );
        }
    }
    Some((
        Task {
            name: name.to_string(),
            path: path.to_string(),
            when,
            input_from,
            output_as,
            export_as,
            schemas,
            timeout,
            status,
            continue_as_new,
            then: Flow::Continue,
            kind,
        },
        then,
        case_thens,
    ))
}

fn call(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    with: Option<&Node>,
    scope: &[String],
) -> Option<Kind> {
    let name = cx.text(node, &format!("{what}: `call`"))?;
    if cx.functions.contains_key(name) {
        let with = with.map(|w| cx.template(w, scope, &format!("{what}: `with`")));
        return Some(Kind::Function {
            name: name.to_string(),
            with,
        });
    }
    match name {
        "http" => return http(cx, what, node, with, scope),
        "openapi" => return openapi(cx, what, node, with, scope),
        "grpc" => return grpc(cx, what, node, with, scope),
        _ => {}
    }
    if name.contains("://") || name.contains('@') {
        cx.error(
            node.span(),
            format!(
                "{what}: `call: {name}`: a custom function from a catalog is not supported by \
                 Ratchet yet; call a Ratchet activity by its name"
            ),
        );
        return None;
    }
    if PROTOCOLS.contains(&name) {
        cx.error(
            node.span(),
            format!(
                "{what}: `call: {name}` is not supported by Ratchet yet; use `call: http` or \
                 `call: openapi`, or call a Ratchet activity by its name"
            ),
        );
        return None;
    }
    if let Some(activities) = &cx.known.activities {
        if !activities.contains(name) {
            cx.error(
                node.span(),
                format!("{what}: no activity named `{name}` is registered"),
            );
        }
    }
    // Without `with`, the activity gets the task's input.
    let with = with.map(|w| cx.template(w, scope, &format!("{what}: `with`")));
    Some(Kind::Call {
        activity: name.to_string(),
        with,
    })
}

/// The `with` of a protocol call, which it needs.
fn call_with<'n>(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    with: Option<&'n Node>,
    protocol: &str,
) -> Option<&'n MarkedMappingNode> {
    match with {
        Some(w) => cx.mapping(w, &format!("{what}: `with`")),
        None => {
            cx.error(
                node.span(),
                format!("{what}: `call: {protocol}` needs `with`"),
            );
            None
        }
    }
}

/// The part `key` of a call's `with`; when missing, an error naming it.
fn call_part<'n>(
    cx: &mut Cx<'_>,
    what: &str,
    with: &'n MarkedMappingNode,
    protocol: &str,
    key: &str,
) -> Option<&'n Node> {
    let found = with.get_node(key);
    if found.is_none() {
        cx.error(
            place(with),
            format!("{what}: `call: {protocol}` has no with.{key}"),
        );
    }
    found
}

/// A resource a call reads, `with.<key>: {name, endpoint}` (an OpenAPI document, a .proto).
fn call_resource(
    cx: &mut Cx<'_>,
    what: &str,
    with: &MarkedMappingNode,
    protocol: &str,
    key: &str,
    scope: &[String],
) -> Option<Endpoint> {
    let at = format!("{what}: with.{key}");
    let node = call_part(cx, what, with, protocol, key)?;
    let resource = cx.mapping(node, &at)?;
    cx.only(resource, &["name", "endpoint"], &at);
    let e = cx.required(resource, "endpoint", &at)?;
    endpoint(cx, e, scope, &format!("{at}.endpoint"))
}

/// `output` and `redirect` of a call.
fn call_output(cx: &mut Cx<'_>, what: &str, with: &MarkedMappingNode) -> (CallOutput, bool) {
    let output = match with.get_node("output") {
        None => CallOutput::Content,
        Some(n) => match n.as_scalar().map(|s| s.as_str()) {
            Some("content") => CallOutput::Content,
            Some("response") => CallOutput::Response,
            Some("raw") => CallOutput::Raw,
            _ => {
                cx.error(
                    n.span(),
                    format!("{what}: with.output is one of content, response, raw"),
                );
                CallOutput::Content
            }
        },
    };
    let redirect = match with.get_node("redirect") {
        None => false,
        Some(n) => match n.as_scalar().and_then(|s| s.as_bool()) {
            Some(b) => b,
            None => {
                cx.error(n.span(), format!("{what}: with.redirect is true or false"));
                false
            }
        },
    };
    (output, redirect)
}

fn http(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    with: Option<&Node>,
    scope: &[String],
) -> Option<Kind> {
    let with = call_with(cx, what, node, with, "http")?;
    cx.only(
        with,
        &[
            "method", "endpoint", "headers", "body", "query", "output", "redirect",
        ],
        &format!("{what}: `with` of `call: http`"),
    );
    let n = call_part(cx, what, with, "http", "method")?;
    let method = cx.template(n, scope, &format!("{what}: with.method"));
    if let Template::Literal(v) = &method {
        if !v.as_str().is_some_and(crate::call::is_method) {
            cx.error(
                n.span(),
                format!("{what}: with.method `{v}` is not an HTTP method"),
            );
        }
    }
    let n = call_part(cx, what, with, "http", "endpoint")?;
    let endpoint = endpoint(cx, n, scope, &format!("{what}: with.endpoint"))?;
    let part = |cx: &mut Cx<'_>, key: &str| {
        with.get_node(key)
            .map(|n| cx.template(n, scope, &format!("{what}: with.{key}")))
    };
    let headers = part(cx, "headers");
    let query = part(cx, "query");
    let body = part(cx, "body");
    let (output, redirect) = call_output(cx, what, with);
    Some(Kind::Http(Box::new(HttpCall {
        method,
        endpoint,
        headers,
        query,
        body,
        output,
        redirect,
    })))
}

fn openapi(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    with: Option<&Node>,
    scope: &[String],
) -> Option<Kind> {
    let with = call_with(cx, what, node, with, "openapi")?;
    cx.only(
        with,
        &[
            "document",
            "operationId",
            "parameters",
            "authentication",
            "output",
            "redirect",
        ],
        &format!("{what}: `with` of `call: openapi`"),
    );
    let document = call_resource(cx, what, with, "openapi", "document", scope)?;
    let n = call_part(cx, what, with, "openapi", "operationId")?;
    let operation = cx
        .text(n, &format!("{what}: with.operationId"))?
        .to_string();
    let parameters = with
        .get_node("parameters")
        .map(|n| cx.template(n, scope, &format!("{what}: with.parameters")));
    let auth = match with.get_node("authentication") {
        Some(n) => Some(authentication(
            cx,
            n,
            scope,
            &format!("{what}: with.authentication"),
        )?),
        None => None,
    };
    let (output, redirect) = call_output(cx, what, with);
    Some(Kind::OpenApi(Box::new(OpenApiCall {
        document,
        operation,
        parameters,
        auth,
        output,
        redirect,
    })))
}

/// `call: grpc`: `proto.endpoint`, `service.{name, host, port, authentication}`, `method`,
/// `arguments`.
fn grpc(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    with: Option<&Node>,
    scope: &[String],
) -> Option<Kind> {
    let with = call_with(cx, what, node, with, "grpc")?;
    cx.only(
        with,
        &["proto", "service", "method", "arguments"],
        &format!("{what}: `with` of `call: grpc`"),
    );
    let proto = call_resource(cx, what, with, "grpc", "proto", scope)?;
    let at = format!("{what}: with.service");
    let service = call_part(cx, what, with, "grpc", "service")?;
    let service = cx.mapping(service, &at)?;
    cx.only(service, &["name", "host", "port", "authentication"], &at);
    let name = cx.required(service, "name", &at);
    let host = cx.required(service, "host", &at);
    let name = cx.text(name?, &format!("{at}.name"))?.to_string();
    let host = cx.template(host?, scope, &format!("{at}.host"));
    let port = service
        .get_node("port")
        .map(|n| cx.template(n, scope, &format!("{at}.port")));
    let auth = match service.get_node("authentication") {
        Some(n) => Some(authentication(
            cx,
            n,
            scope,
            &format!("{at}.authentication"),
        )?),
        None => None,
    };
    let n = call_part(cx, what, with, "grpc", "method")?;
    let method = cx.text(n, &format!("{what}: with.method"))?.to_string();
    let arguments = with
        .get_node("arguments")
        .map(|n| cx.template(n, scope, &format!("{what}: with.arguments")));
    Some(Kind::Grpc(Box::new(GrpcCall {
        proto,
        service: name,
        host,
        port,
        method,
        arguments,
        auth,
    })))
}

/// An endpoint: a URI (template) or expression, or `{uri, authentication}`.
fn endpoint(cx: &mut Cx<'_>, node: &Node, scope: &[String], what: &str) -> Option<Endpoint> {
    let (uri_node, auth) = match node {
        Node::Mapping(m) => {
            cx.only(m, &["uri", "authentication"], what);
            let auth = match m.get_node("authentication") {
                Some(n) => Some(authentication(
                    cx,
                    n,
                    scope,
                    &format!("{what}.authentication"),
                )?),
                None => None,
            };
            (cx.required(m, "uri", what)?, auth)
        }
        other => (other, None),
    };
    let text = cx.text(uri_node, &format!("{what} uri"))?;
    let uri = match expr::strip(text) {
        Some(_) => cx.template(uri_node, scope, what),
        None => {
            // A URI template: checked now, expanded from the task's input when it runs.
            if let Err(e) = crate::call::uri::check(text) {
                cx.error(uri_node.span(), format!("{what}: {e}"));
                return None;
            }
            Template::Literal(Value::String(text.to_string()))
        }
    };
    Some(Endpoint { uri, auth })
}

/// A `timeout`: `{after: duration}`, or the name of one of `use.timeouts`.
fn timeout(cx: &mut Cx<'_>, node: &Node, what: &str) -> Option<Duration> {
    if let Node::Scalar(name) = node {
        let found = cx.timeouts.get(name.as_str()).copied();
        if found.is_none() {
            cx.error(
                name.span(),
                format!(
                    "{what}: `{}` names no timeout of the workflow's use.timeouts",
                    name.as_str()
                ),
            );
        }
        return found;
    }
    let m = cx.mapping(node, what)?;
    cx.only(m, &["after"], what);
    m.get_node("after")
        .and_then(|a| cx.duration(a, &format!("{what}.after")))
}

/// The workflow's `use`: its secrets and named authentications (the rest is refused,
/// naming it).
fn uses(cx: &mut Cx<'_>, node: &Node, scope: &[String]) {
    let Some(m) = cx.mapping(node, "`use`") else {
        return;
    };
    for key in m.keys() {
        if !matches!(
            key.as_str(),
            "secrets" | "authentications" | "functions" | "errors" | "retries" | "timeouts"
        ) {
            cx.error(
                key.span(),
                format!(
                    "`use.{}` at the top of a workflow is not supported by Ratchet yet (secrets, authentications, functions, errors, retries and timeouts are)",
                    key.as_str()
                ),
            );
        }
    }
    if let Some(secrets) = m.get_node("secrets") {
        match secrets.as_sequence() {
            Some(items) => {
                for item in items.iter() {
                    if let Some(name) = cx.text(item, "a secret of use.secrets") {
                        cx.secrets.insert(name.to_string());
                    }
                }
            }
            None => cx.error(secrets.span(), "use.secrets is a list of secret names"),
        }
    }
    for (name, policy) in named(cx, m, "authentications") {
        let what = format!("use.authentications.{name}");
        if let Some(auth) = authentication(cx, policy, scope, &what) {
            cx.authentications.insert(name.to_string(), auth);
        }
    }
    for (name, def) in named(cx, m, "errors") {
        if let Some(e) = error_definition(cx, def, scope, &format!("use.errors.{name}")) {
            cx.named_errors.insert(name.to_string(), e);
        }
    }
    for (name, def) in named(cx, m, "retries") {
        // A named policy's `when` sees the caught error as `.` and the workflow's variables.
        if let Some(r) = retry(cx, &format!("use.retries.{name}"), def, scope) {
            cx.retries.insert(name.to_string(), r);
        }
    }
    for (name, def) in named(cx, m, "timeouts") {
        if let Some(d) = timeout(cx, def, &format!("use.timeouts.{name}")) {
            cx.timeouts.insert(name.to_string(), d);
        }
    }
    // A function is a task, run with the call's `with` as its input; it may call functions
    // defined before it.
    for (name, def) in named(cx, m, "functions") {
        let path = format!("/use/functions/{}", pointer_token(name));
        if let Some((task, then, _)) = task(cx, name, def, scope, &path) {
            if let Some((_, span)) = then {
                cx.error(
                    &span,
                    format!("function `{name}`: a function has no `then`"),
                );
            }
            cx.functions.insert(name.to_string(), task);
        }
    }
}

/// The entries of `use.<key>`, a mapping of names to definitions, in order.
fn named<'n>(cx: &mut Cx<'_>, uses: &'n MarkedMappingNode, key: &str) -> Vec<(&'n str, &'n Node)> {
    uses.get_node(key)
        .and_then(|n| cx.mapping(n, &format!("use.{key}")))
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

/// Credentials from a secret (`{use: name}`), when the policy is written so: resolved by the
/// worker that sends the call, so they are never part of what the workflow records. `None`
/// when the policy is written inline.
fn secret_policy(
    cx: &mut Cx<'_>,
    inner: &MarkedMappingNode,
    at: &str,
    scheme: Scheme,
) -> Option<Option<Auth>> {
    let secret = inner.get_node("use")?;
    cx.only(inner, &["use"], at);
    let Some(name) = cx.text(secret, &format!("{at}.use")) else {
        return Some(None);
    };
    if !cx.secrets.contains(name) {
        cx.error(
            secret.span(),
            format!("{at}: `use: {name}` names no secret of the workflow's use.secrets"),
        );
        return Some(None);
    }
    Some(Some(Auth::Secret {
        scheme,
        secret: name.to_string(),
    }))
}

/// A list of strings (`scopes`, `audiences`).
fn strings(cx: &mut Cx<'_>, node: Option<&Node>, what: &str) -> Vec<String> {
    let Some(node) = node else {
        return Vec::new();
    };
    match node.as_sequence() {
        Some(items) => items
            .iter()
            .filter_map(|i| cx.text(i, what).map(str::to_string))
            .collect(),
        None => {
            cx.error(node.span(), format!("{what} is a list of strings"));
            Vec::new()
        }
    }
}

/// An `oauth2` or `oidc` policy: the client-credentials grant, written inline or from a
/// secret.
fn oauth2(cx: &mut Cx<'_>, node: &Node, scope: &[String], at: &str, oidc: bool) -> Option<Auth> {
    let inner = cx.mapping(node, at)?;
    let scheme = if oidc { Scheme::Oidc } else { Scheme::OAuth2 };
    if let Some(from_secret) = secret_policy(cx, inner, at, scheme) {
        return from_secret;
    }
    cx.only(
        inner,
        &[
            "authority",
            "grant",
            "client",
            "scopes",
            "audiences",
            "endpoints",
            "issuers",
        ],
        at,
    );
    let grant = match inner.get_node("grant") {
        Some(g) => cx.text(g, &format!("{at}.grant"))?,
        None => "client_credentials",
    };
    if grant != "client_credentials" {
        let span = *inner.get_node("grant").map_or(place(inner), |g| g.span());
        cx.error(
            &span,
            format!(
                "{at}: the `{grant}` grant is not supported by Ratchet yet (client_credentials is)"
            ),
        );
        return None;
    }
    let authority = match inner.get_node("authority") {
        Some(a) => cx.template(a, scope, &format!("{at}.authority")),
        None => {
            cx.error(place(inner), format!("{at} has no `authority`"));
            return None;
        }
    };
    let token = match inner.get_node("endpoints") {
        None => None,
        Some(e) => {
            let e = cx.mapping(e, &format!("{at}.endpoints"))?;
            cx.only(
                e,
                &["token", "revocation", "introspection"],
                &format!("{at}.endpoints"),
            );
            if oidc {
                cx.error(
                    place(e),
                    format!(
                        "{at}: an OpenID Connect authority's endpoints are discovered, not given"
                    ),
                );
            }
            e.get_node("token")
                .map(|t| cx.template(t, scope, &format!("{at}.endpoints.token")))
        }
    };
    let Some(client) = inner.get_node("client") else {
        cx.error(
            place(inner),
            format!("{at} has no `client` (its `id` and `secret`)"),
        );
        return None;
    };
    let client = cx.mapping(client, &format!("{at}.client"))?;
    cx.only(
        client,
        &["id", "secret", "authentication"],
        &format!("{at}.client"),
    );
    let client_id = match client.get_node("id") {
        Some(n) => cx.template(n, scope, &format!("{at}.client.id")),
        None => {
            cx.error(place(client), format!("{at}.client has no `id`"));
            return None;
        }
    };
    let client_secret = client
        .get_node("secret")
        .map(|n| cx.template(n, scope, &format!("{at}.client.secret")));
    let client_basic = match client.get_node("authentication") {
        None => false,
        Some(n) => match cx.text(n, &format!("{at}.client.authentication"))? {
            "client_secret_basic" => true,
            "client_secret_post" => false,
            other => {
                cx.error(
                    n.span(),
                    format!("{at}: client authentication `{other}` is not supported by Ratchet yet (client_secret_basic and client_secret_post are)"),
                );
                return None;
            }
        },
    };
    let scopes = strings(cx, inner.get_node("scopes"), &format!("{at}.scopes"));
    let audiences = strings(cx, inner.get_node("audiences"), &format!("{at}.audiences"));
    Some(Auth::OAuth2(Box::new(OAuth2Policy {
        oidc,
        authority,
        token,
        client_id,
        client_secret,
        client_basic,
        scopes,
        audiences,
    })))
}

/// An authentication policy: `basic`, `bearer`, `oauth2` or `oidc`, written inline or from a
/// secret, or the name of one of `use.authentications`.
fn authentication(cx: &mut Cx<'_>, node: &Node, scope: &[String], what: &str) -> Option<Auth> {
    let m = cx.mapping(node, what)?;
    let given: Vec<&MarkedScalarNode> = m.keys().collect();
    let [scheme] = given.as_slice() else {
        cx.error(
            place(m),
            format!("{what} names one scheme: basic, bearer, digest, oauth2 or oidc"),
        );
        return None;
    };
    let field = |cx: &mut Cx<'_>, inner: &MarkedMappingNode, key: &str, at: &str| {
        let n = cx.required(inner, key, at)?;
        Some(cx.template(n, scope, &format!("{at}.{key}")))
    };
    let at = format!("{what}.{}", scheme.as_str());
    let inner_node = m.get_node(scheme.as_str())?;
    match scheme.as_str() {
        "basic" | "bearer" | "digest" => {
            let inner = cx.mapping(inner_node, &at)?;
            let kind = match scheme.as_str() {
                "bearer" => Scheme::Bearer,
                "digest" => Scheme::Digest,
                _ => Scheme::Basic,
            };
            if let Some(from_secret) = secret_policy(cx, inner, &at, kind) {
                return from_secret;
            }
            if kind == Scheme::Bearer {
                cx.only(inner, &["token"], &at);
                return Some(Auth::Bearer {
                    token: field(cx, inner, "token", &at)?,
                });
            }
            cx.only(inner, &["username", "password"], &at);
            let username = field(cx, inner, "username", &at)?;
            let password = field(cx, inner, "password", &at)?;
            Some(if kind == Scheme::Digest {
                Auth::Digest { username, password }
            } else {
                Auth::Basic { username, password }
            })
        }
        "oauth2" | "oidc" => oauth2(cx, inner_node, scope, &at, scheme.as_str() == "oidc"),
        "use" => {
            let name = cx.text(inner_node, &at)?;
            match cx.authentications.get(name) {
                Some(auth) => Some(auth.clone()),
                None => {
                    cx.error(
                        inner_node.span(),
                        format!("{what}: `use: {name}` names no authentication of the workflow's use.authentications"),
                    );
                    None
                }
            }
        }
        other => {
            cx.error(
                scheme.span(),
                format!("{what}: `{other}` authentication is not supported by Ratchet yet (basic, bearer, digest, oauth2 and oidc are)"),
            );
            None
        }
    }
}

fn switch(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    scope: &[String],
    thens: &mut Vec<(String, Span)>,
) -> Option<Kind> {
    let Some(items) = node.as_sequence() else {
        cx.error(
            node.span(),
            format!("{what}: `switch` is a list of cases (`- name: {{when, then}}`)"),
        );
        return None;
    };
    let mut cases = Vec::new();
    for item in items.iter() {
        let Some((key, def)) = item
            .as_mapping()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.iter().next())
        else {
            cx.error(
                item.span(),
                format!("{what}: each case is `- name: {{when, then}}`"),
            );
            continue;
        };
        let case_what = format!("{what}, case `{}`", key.as_str());
        let Some(m) = cx.mapping(def, &case_what) else {
            continue;
        };
        cx.only(m, &["when", "then"], &case_what);
        let when = m
            .get_node("when")
            .and_then(|n| cx.expr(n, scope, &format!("{case_what}: `when`")));
        let then = match m.get_node("then") {
            Some(n) => cx
                .text(n, &format!("{case_what}: `then`"))
                .map(|t| (t.to_string(), *n.span())),
            None => {
                cx.error(place(m), format!("{case_what} has no `then`"));
                None
            }
        };
        let Some(then) = then else { continue };
        if m.get_node("when").is_none()
            && items.iter().position(|i| std::ptr::eq(i, item)) != Some(items.len() - 1)
        {
            cx.error(
                key.span(),
                format!("{case_what}: the default case (no `when`) must be the last"),
            );
        }
        cases.push(Case {
            name: key.as_str().to_string(),
            when,
            then: Flow::Continue,
        });
        thens.push(then);
    }
    Some(Kind::Switch(cases))
}

fn for_each(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    task: &MarkedMappingNode,
    scope: &[String],
    path: &str,
) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `for`"))?;
    cx.only(m, &["each", "in", "at"], &format!("{what}: `for`"));
    let name_of = |cx: &mut Cx<'_>, key: &str, default: &str| -> String {
        m.get_node(key)
            .and_then(|n| cx.text(n, &format!("{what}: for.{key}")))
            .map_or_else(
                || default.to_string(),
                |t| t.trim_start_matches('$').to_string(),
            )
    };
    let each = name_of(cx, "each", "item");
    let at = name_of(cx, "at", "index");
    let list = match m.get_node("in") {
        Some(n) => cx.expr(n, scope, &format!("{what}: for.in")),
        None => {
            cx.error(
                place(m),
                format!("{what}: `for` has no `in`: the list to go through"),
            );
            None
        }
    };
    let mut inner = scope.to_vec();
    inner.extend([format!("${each}"), format!("${at}")]);
    let while_ = task
        .get_node("while")
        .and_then(|n| cx.expr(n, &inner, &format!("{what}: `while`")));
    let body = match task.get_node("do") {
        Some(n) => block(
            cx,
            n,
            &inner,
            &format!("{what}: `do`"),
            &format!("{path}/do"),
        ),
        None => {
            cx.error(place(task), format!("{what}: `for` has no `do`"));
            None
        }
    };
    Some(Kind::For {
        each: format!("${each}"),
        at: format!("${at}"),
        list: list?,
        while_,
        body: body?,
    })
}

fn fork(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String], path: &str) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `fork`"))?;
    cx.only(m, &["branches", "compete"], &format!("{what}: `fork`"));
    let compete = match m.get_node("compete") {
        Some(n) => match n.as_scalar().and_then(|s| s.as_bool()) {
            Some(b) => b,
            None => {
                cx.error(
                    n.span(),
                    format!("{what}: fork.compete must be true or false"),
                );
                false
            }
        },
        None => false,
    };
    let branches = match m.get_node("branches") {
        Some(n) => block(
            cx,
            n,
            scope,
            &format!("{what}: fork.branches"),
            &format!("{path}/fork/branches"),
        ),
        None => {
            cx.error(place(m), format!("{what}: `fork` has no `branches`"));
            None
        }
    }?;
    Some(Kind::Fork { compete, branches })
}

fn listen(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String]) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `listen`"))?;
    cx.only(m, &["to", "read"], &format!("{what}: `listen`"));
    let read = match m.get_node("read") {
        None => None,
        Some(n) => match cx.text(n, &format!("{what}: listen.read"))? {
            "data" => Some(true),
            "envelope" => Some(false),
            other => {
                cx.error(
                    n.span(),
                    format!("{what}: `listen.read: {other}` is not supported by Ratchet yet (data and envelope are)"),
                );
                return None;
            }
        },
    };
    let to = m
        .get_node("to")
        .and_then(|n| cx.mapping(n, &format!("{what}: listen.to")));
    let Some(to) = to else {
        cx.error(place(m), format!("{what}: `listen` has no `to`"));
        return None;
    };
    strategy(cx, what, to, read, scope, false)
}

/// An event consumption strategy (`listen.to`, `schedule.on`): `one`, `any` or `all` of
/// filters, and `until`. With `events_only`, a filter of only a `type` is an event of the
/// store too, not a signal (a workflow not yet started has no signals).
fn strategy(
    cx: &mut Cx<'_>,
    what: &str,
    to: &MarkedMappingNode,
    read: Option<bool>,
    scope: &[String],
    events_only: bool,
) -> Option<Kind> {
    cx.only(
        to,
        &["one", "all", "any", "until"],
        &format!("{what}: listen.to"),
    );
    let until = match to.get_node("until") {
        None => None,
        Some(n) => Some(until(cx, n, scope, what, events_only)?),
    };
    if until.is_some() && to.get_node("any").is_none() {
        cx.error(
            place(to),
            format!("{what}: listen.to.until goes with `any` (it says when to stop listening to any of them)"),
        );
        return None;
    }
    for strategy in ["any", "all"] {
        let Some(list) = to.get_node(strategy) else {
            continue;
        };
        let at = format!("{what}: listen.to.{strategy}");
        // `any: []` is any event of the store at all.
        let Some(items) = list
            .as_sequence()
            .filter(|i| strategy == "any" || !i.is_empty())
        else {
            cx.error(
                list.span(),
                format!("{at} is a list of filters (`- with: {{type}}`)"),
            );
            return None;
        };
        let mut filters = Vec::new();
        for item in items.iter() {
            filters.push(filter(cx, item, scope, &at, events_only)?);
        }
        return Some(Kind::ListenMany {
            all: strategy == "all",
            filters,
            data_only: read.unwrap_or(false),
            one: false,
            until,
        });
    }
    let one = to.get_node("one")?;
    let found = filter(
        cx,
        one,
        scope,
        &format!("{what}: listen.to.one"),
        events_only,
    )?;
    // Without `read`, as before: a signal's payload, or an event's envelope.
    if read.is_none() {
        if let Filter::Signal(signal) = found {
            return Some(Kind::Listen { signal });
        }
    }
    Some(Kind::ListenMany {
        all: false,
        filters: vec![found],
        data_only: read.unwrap_or(false),
        one: read.is_none(),
        until: None,
    })
}

/// `listen.to.until`: an expression of the events consumed so far, or the events (`one` or
/// `any` of them) that end the listening.
fn until(
    cx: &mut Cx<'_>,
    node: &Node,
    scope: &[String],
    what: &str,
    events_only: bool,
) -> Option<Until> {
    let at = format!("{what}: listen.to.until");
    let Some(strategy) = node.as_mapping() else {
        return Some(Until::Holds(cx.expr(node, scope, &at)?));
    };
    cx.only(strategy, &["one", "any"], &at);
    if let Some(one) = strategy.get_node("one") {
        return Some(Until::Event(vec![filter(
            cx,
            one,
            scope,
            &at,
            events_only,
        )?]));
    }
    let Some(items) = strategy.get_node("any").and_then(Node::as_sequence) else {
        cx.error(
            place(strategy),
            format!("{at} is an expression, or `one` or `any` of the events that end it"),
        );
        return None;
    };
    let mut filters = Vec::new();
    for item in items.iter() {
        filters.push(filter(cx, item, scope, &at, events_only)?);
    }
    Some(Until::Event(filters))
}

/// One `listen` filter: `{with: {type}}` a signal; anything more (`tags`, `source`, `data`,
/// any CloudEvent attribute, `correlate`) an event of the event store.
fn filter(
    cx: &mut Cx<'_>,
    node: &Node,
    scope: &[String],
    what: &str,
    events_only: bool,
) -> Option<Filter> {
    let item = cx.mapping(node, what)?;
    cx.only(item, &["with", "correlate"], what);
    let with = item
        .get_node("with")
        .and_then(|n| cx.mapping(n, &format!("{what}.with")))?;
    if with.is_empty() {
        cx.error(
            place(with),
            format!("{what}.with names no attribute: give at least its `type`"),
        );
        return None;
    }
    let kind = match with.get_node("type") {
        Some(n) => Some(cx.text(n, &format!("{what}: the `type`"))?.to_string()),
        None => None,
    };
    let mut correlate = Vec::new();
    if let Some(c) = item.get_node("correlate") {
        let c = cx.mapping(c, &format!("{what}.correlate"))?;
        for (key, value) in c.iter() {
            let at = format!("{what}.correlate.{}", key.as_str());
            let Some(value) = cx.mapping(value, &at) else {
                continue;
            };
            cx.only(value, &["from", "expect"], &at);
            let Some(from) = cx.required(value, "from", &at) else {
                continue;
            };
            let Some(from) = cx.expr(from, scope, &format!("{at}.from")) else {
                continue;
            };
            let expect = value
                .get_node("expect")
                .map(|n| cx.template(n, scope, &format!("{at}.expect")));
            correlate.push((key.as_str().to_string(), from, expect));
        }
    }
    let others: Vec<_> = with
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "type" | "tags"))
        .collect();
    if !events_only && others.is_empty() && correlate.is_empty() && with.get_node("tags").is_none()
    {
        if let Some(kind) = kind {
            return Some(Filter::Signal(kind));
        }
    }
    let tags = with.get_node("tags").map(|tags| {
        if tags.as_sequence().is_none() && !matches!(tags, Node::Scalar(_)) {
            cx.error(
                tags.span(),
                format!("{what}.with.tags must be a list of tags"),
            );
        }
        cx.template(tags, scope, &format!("{what}.with.tags"))
    });
    let with = others
        .into_iter()
        .map(|(k, v)| {
            let key = k.as_str().to_string();
            let t = cx.template(v, scope, &format!("{what}.with.{key}"));
            (key, t)
        })
        .collect();
    Some(Filter::Event(EventFilter {
        kind,
        tags,
        with,
        correlate,
    }))
}

fn raise(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String]) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `raise`"))?;
    cx.only(m, &["error"], &format!("{what}: `raise`"));
    match m.get_node("error") {
        // One of `use.errors`, by name.
        Some(Node::Scalar(name)) => match cx.named_errors.get(name.as_str()) {
            Some(e) => Some(Kind::Raise(e.clone())),
            None => {
                cx.error(
                    name.span(),
                    format!(
                        "{what}: raise.error `{}` names no error of the workflow's use.errors",
                        name.as_str()
                    ),
                );
                None
            }
        },
        Some(n) => error_definition(cx, n, scope, &format!("{what}: raise.error")).map(Kind::Raise),
        None => {
            cx.error(place(m), format!("{what}: `raise` has no `error`"));
            None
        }
    }
}

/// An error: `{type, status, title, detail}`, each of which may hold expressions.
fn error_definition(
    cx: &mut Cx<'_>,
    node: &Node,
    scope: &[String],
    what: &str,
) -> Option<ErrorTemplate> {
    let error = cx.mapping(node, what)?;
    cx.only(
        error,
        &["type", "status", "title", "detail", "instance"],
        what,
    );
    let mut required = |key: &str| {
        let n = cx.required(error, key, what)?;
        Some(cx.template(n, scope, &format!("{what}.{key}")))
    };
    let kind = required("type");
    let status = required("status");
    let title = error
        .get_node("title")
        .map(|n| cx.template(n, scope, &format!("{what}.title")));
    let detail = error
        .get_node("detail")
        .map(|n| cx.template(n, scope, &format!("{what}.detail")));
    Some(ErrorTemplate {
        kind: kind?,
        status: status?,
        title,
        detail,
    })
}

fn try_catch(
    cx: &mut Cx<'_>,
    what: &str,
    node: &Node,
    catch: Option<&Node>,
    scope: &[String],
    path: &str,
) -> Option<Kind> {
    let body = block(
        cx,
        node,
        scope,
        &format!("{what}: `try`"),
        &format!("{path}/try"),
    );
    let Some(catch) = catch else {
        cx.error(node.span(), format!("{what}: `try` has no `catch`"));
        return None;
    };
    let m = cx.mapping(catch, &format!("{what}: `catch`"))?;
    cx.only(
        m,
        &["errors", "as", "when", "exceptWhen", "retry", "do"],
        &format!("{what}: `catch`"),
    );
    let var = m
        .get_node("as")
        .and_then(|n| cx.text(n, &format!("{what}: catch.as")))
        .map_or_else(
            || "$error".to_string(),
            |v| format!("${}", v.trim_start_matches('$')),
        );
    let mut with = Vec::new();
    if let Some(errors) = m
        .get_node("errors")
        .and_then(|n| cx.mapping(n, &format!("{what}: catch.errors")))
    {
        cx.only(errors, &["with"], &format!("{what}: catch.errors"));
        if let Some(filter) = errors
            .get_node("with")
            .and_then(|n| cx.mapping(n, &format!("{what}: catch.errors.with")))
        {
            cx.only(
                filter,
                &["type", "status", "title", "detail", "instance"],
                &format!("{what}: catch.errors.with"),
            );
            with = filter
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), literal(v)))
                .collect();
        }
    }
    let mut inner = scope.to_vec();
    inner.push(var.clone());
    let when = m
        .get_node("when")
        .and_then(|n| cx.expr(n, &inner, &format!("{what}: catch.when")));
    let except_when = m
        .get_node("exceptWhen")
        .and_then(|n| cx.expr(n, &inner, &format!("{what}: catch.exceptWhen")));
    let retry = m.get_node("retry").and_then(|n| retry(cx, what, n, &inner));
    let handler = match m.get_node("do") {
        Some(n) => Some(block(
            cx,
            n,
            &inner,
            &format!("{what}: catch.do"),
            &format!("{path}/catch/do"),
        )?),
        None => None,
    };
    Some(Kind::Try {
        body: body?,
        catch: Catch {
            with,
            var,
            when,
            except_when,
            retry,
            body: handler,
        },
    })
}

/// A `catch.retry`, inline or naming one of `use.retries`; its `when` and `exceptWhen` see
/// the caught error as `.` and the variables of `scope`.
fn retry(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String]) -> Option<Retry> {
    if let Node::Scalar(name) = node {
        return match cx.retries.get(name.as_str()) {
            Some(r) => Some(r.clone()),
            None => {
                cx.error(
                    name.span(),
                    format!(
                        "{what}: retry `{}` names no retry policy of the workflow's use.retries",
                        name.as_str()
                    ),
                );
                None
            }
        };
    }
    let m = cx.mapping(node, &format!("{what}: catch.retry"))?;
    cx.only(
        m,
        &["when", "exceptWhen", "delay", "backoff", "limit", "jitter"],
        &format!("{what}: catch.retry"),
    );
    let when = m
        .get_node("when")
        .and_then(|n| cx.expr(n, scope, &format!("{what}: retry.when")));
    let except_when = m
        .get_node("exceptWhen")
        .and_then(|n| cx.expr(n, scope, &format!("{what}: retry.exceptWhen")));
    let delay = m
        .get_node("delay")
        .and_then(|n| cx.duration(n, &format!("{what}: retry.delay")))
        .unwrap_or(Duration::from_secs(1));
    let backoff = match m
        .get_node("backoff")
        .and_then(|n| cx.mapping(n, &format!("{what}: retry.backoff")))
    {
        None => Backoff::Constant,
        Some(b) => {
            cx.only(
                b,
                &["constant", "exponential", "linear"],
                &format!("{what}: retry.backoff"),
            );
            if b.get_node("exponential").is_some() {
                Backoff::Exponential
            } else if b.get_node("linear").is_some() {
                Backoff::Linear
            } else {
                Backoff::Constant
            }
        }
    };
    let (attempts, attempt_limit, limit) = match m
        .get_node("limit")
        .and_then(|n| cx.mapping(n, &format!("{what}: retry.limit")))
    {
        None => (3, None, None),
        Some(l) => retry_limit(cx, what, l),
    };
    let jitter = m
        .get_node("jitter")
        .and_then(|n| cx.mapping(n, &format!("{what}: retry.jitter")))
        .and_then(|j| {
            cx.only(j, &["from", "to"], &format!("{what}: retry.jitter"));
            let mut bound = |key: &str| match j.get_node(key) {
                Some(n) => cx.duration(n, &format!("{what}: retry.jitter.{key}")),
                None => {
                    cx.error(place(j), format!("{what}: retry.jitter needs `{key}`"));
                    None
                }
            };
            let (from, to) = (bound("from")?, bound("to")?);
            if from > to {
                cx.error(
                    place(j),
                    format!("{what}: retry.jitter.from is longer than retry.jitter.to"),
                );
                return None;
            }
            Some((from, to))
        });
    Some(Retry {
        when,
        except_when,
        delay,
        backoff,
        attempts,
        attempt_limit,
        limit,
        jitter,
    })
}

/// A retry's `limit`: attempts in all (`attempt.count`), how long one attempt may run
/// (`attempt.duration`) and how long retries may go on (`duration`). A count or a duration
/// must bound the attempts.
fn retry_limit(
    cx: &mut Cx<'_>,
    what: &str,
    l: &MarkedMappingNode,
) -> (u32, Option<Duration>, Option<Duration>) {
    cx.only(l, &["attempt", "duration"], &format!("{what}: retry.limit"));
    let limit = l
        .get_node("duration")
        .and_then(|n| cx.duration(n, &format!("{what}: retry.limit.duration")));
    let attempt = l
        .get_node("attempt")
        .and_then(|n| cx.mapping(n, &format!("{what}: retry.limit.attempt")));
    let mut count = None;
    let mut attempt_limit = None;
    if let Some(a) = attempt {
        cx.only(
            a,
            &["count", "duration"],
            &format!("{what}: retry.limit.attempt"),
        );
        count = match a.get_node("count") {
            None => None,
            Some(c) => match c.as_scalar().and_then(|c| c.as_u32()) {
                Some(n) if n >= 1 => Some(n),
                _ => {
                    cx.error(
                        c.span(),
                        format!("{what}: retry.limit.attempt.count is a whole number, at least 1"),
                    );
                    Some(1)
                }
            },
        };
        attempt_limit = a.get_node("duration").and_then(|n| {
            let d = cx.duration(n, &format!("{what}: retry.limit.attempt.duration"))?;
            if d.is_zero() {
                cx.error(
                    n.span(),
                    format!("{what}: retry.limit.attempt.duration must be longer than zero"),
                );
                return None;
            }
            Some(d)
        });
    }
    let attempts = match (count, limit) {
        (Some(n), _) => n,
        (None, Some(_)) => u32::MAX,
        (None, None) => {
            cx.error(
                place(l),
                format!("{what}: retry.limit needs attempt.count or duration"),
            );
            1
        }
    };
    (attempts, attempt_limit, limit)
}

fn run(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String]) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `run`"))?;
    if let Some(key) = m.keys().find(|k| k.as_str() == "container") {
        cx.error(
            key.span(),
            format!("{what}: `run: container` is not supported by Ratchet: run a shell command, a script or a workflow"),
        );
        return None;
    }
    if m.get_node("shell").is_some() || m.get_node("script").is_some() {
        return process(cx, what, m, scope);
    }
    cx.only(m, &["workflow", "await"], &format!("{what}: `run`"));
    let w = m
        .get_node("workflow")
        .and_then(|n| cx.mapping(n, &format!("{what}: run.workflow")))?;
    cx.only(
        w,
        &["namespace", "name", "version", "input"],
        &format!("{what}: run.workflow"),
    );
    let mut field = |key: &str| {
        let n = cx.required(w, key, &format!("{what}: run.workflow"))?;
        cx.text(n, &format!("{what}: run.workflow.{key}"))
            .map(str::to_string)
    };
    let namespace = field("namespace");
    let name = field("name");
    let version = field("version");
    let (namespace, name, version) = (namespace?, name?, version?);
    let target = (namespace.clone(), name.clone(), version);
    let declarative = crate::orchestration_name(&namespace, &name);
    let orchestration = match &cx.known.orchestrations {
        Some(known) if known.contains(&declarative) => declarative,
        // A Rust orchestration has no namespace of its own.
        Some(known) if known.contains(&name) => name,
        Some(_) => {
            let at = w.get_node("name").map_or(place(w), |n| n.span());
            cx.error(
                at,
                format!(
                    "{what}: no workflow `{declarative}` nor orchestration `{name}` is registered"
                ),
            );
            return None;
        }
        None => declarative,
    };
    let input = match w.get_node("input") {
        Some(n) => cx.template(n, scope, &format!("{what}: run.workflow.input")),
        None => Template::Expr(Expr::compile(".", scope).ok()?),
    };
    Some(Kind::Run {
        target,
        orchestration,
        input,
    })
}

/// `run: shell` or `run: script`, with `return` and `await`.
fn process(cx: &mut Cx<'_>, what: &str, m: &MarkedMappingNode, scope: &[String]) -> Option<Kind> {
    cx.only(
        m,
        &["shell", "script", "return", "await"],
        &format!("{what}: `run`"),
    );
    let output = match m.get_node("return") {
        None => ProcessOutput::Stdout,
        Some(n) => {
            match cx.text(n, &format!("{what}: run.return"))? {
                "stdout" => ProcessOutput::Stdout,
                "stderr" => ProcessOutput::Stderr,
                "code" => ProcessOutput::Code,
                "all" => ProcessOutput::All,
                "none" => ProcessOutput::None,
                other => {
                    cx.error(
                    n.span(),
                    format!("{what}: run.return is stdout, stderr, code, all or none, not {other:?}"),
                );
                    return None;
                }
            }
        }
    };
    let wait = match m.get_node("await") {
        None => true,
        Some(n) => match cx.text(n, &format!("{what}: run.await"))? {
            "true" => true,
            "false" => false,
            other => {
                cx.error(
                    n.span(),
                    format!("{what}: run.await is true or false, not {other:?}"),
                );
                return None;
            }
        },
    };
    let (key, at) = if m.get_node("shell").is_some() {
        ("shell", format!("{what}: run.shell"))
    } else {
        ("script", format!("{what}: run.script"))
    };
    let p = m.get_node(key).and_then(|n| cx.mapping(n, &at))?;
    let (kind, code) = if key == "shell" {
        cx.only(p, &["command", "arguments", "environment", "stdin"], &at);
        (ProcessKind::Shell, cx.required(p, "command", &at)?)
    } else {
        cx.only(
            p,
            &[
                "language",
                "code",
                "source",
                "arguments",
                "environment",
                "stdin",
            ],
            &at,
        );
        if let Some(source) = p.keys().find(|k| k.as_str() == "source") {
            cx.error(
                source.span(),
                format!("{at}.source (a script fetched from elsewhere) is not supported by Ratchet: give its `code`"),
            );
            return None;
        }
        let Some(language) = p.get_node("language") else {
            cx.error(place(p), format!("{at} has no `language` (js or python)"));
            return None;
        };
        let kind = match cx.text(language, &format!("{at}.language"))?.parse() {
            Ok(ProcessKind::Shell) | Err(_) => {
                cx.error(language.span(), format!("{at}.language is js or python"));
                return None;
            }
            Ok(kind) => kind,
        };
        (kind, cx.required(p, "code", &at)?)
    };
    let field = |cx: &mut Cx<'_>, name: &str| {
        p.get_node(name)
            .map(|n| cx.template(n, scope, &format!("{at}.{name}")))
    };
    let code = cx.template(code, scope, &format!("{at}: its code"));
    let arguments = field(cx, "arguments");
    let environment = field(cx, "environment");
    let stdin = field(cx, "stdin");
    Some(Kind::Process(Box::new(ProcessCall {
        kind,
        code,
        arguments,
        environment,
        stdin,
        output,
        wait,
    })))
}

fn emit(cx: &mut Cx<'_>, what: &str, node: &Node, scope: &[String]) -> Option<Kind> {
    let m = cx.mapping(node, &format!("{what}: `emit`"))?;
    cx.only(m, &["event"], &format!("{what}: `emit`"));
    let event = m
        .get_node("event")
        .and_then(|n| cx.mapping(n, &format!("{what}: emit.event")));
    let Some(event) = event else {
        cx.error(place(m), format!("{what}: `emit` has no `event`"));
        return None;
    };
    cx.only(event, &["with"], &format!("{what}: emit.event"));
    let Some(with) = event.get_node("with") else {
        cx.error(place(event), format!("{what}: emit.event has no `with`"));
        return None;
    };
    if let Some(w) = with.as_mapping() {
        if w.get_node("type").is_none() {
            cx.error(place(w), format!("{what}: emit.event.with has no `type`"));
        }
    }
    Some(Kind::Emit(cx.template(
        with,
        scope,
        &format!("{what}: emit.event.with"),
    )))
}
