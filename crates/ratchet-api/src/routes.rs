//! Where each operation of [`Api`](crate::Api) is on a server: its OpenAPI operation id, method
//! and path. The HTTP client sends every call by these, and a test holds them to the server's
//! OpenAPI document both ways (a route without a client method fails it, and so does a method
//! without a route).

/// An HTTP method the API uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
}

impl Method {
    /// As the OpenAPI document writes it (`get`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Put => "put",
            Self::Delete => "delete",
        }
    }
}

/// One operation's place on a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The OpenAPI `operationId`, also the name of the [`Api`](crate::Api) method.
    pub operation: &'static str,
    /// Its method.
    pub method: Method,
    /// Its path, with `{name}` for each segment the call fills in.
    pub path: &'static str,
}

impl Route {
    /// Whether it answers text (a probe's word, an SVG drawing) rather than JSON.
    pub fn answers_text(&self) -> bool {
        self.path.ends_with(".svg") || self.path == "/healthz" || self.path == "/readyz"
    }

    /// The path with its `{…}` segments filled in order, each escaped as a path segment.
    pub fn fill(&self, segments: &[&str]) -> String {
        let mut out = String::with_capacity(self.path.len() + 16);
        let mut rest = self.path;
        let mut given = segments.iter();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
            out.push_str(&escape(given.next().copied().unwrap_or_default()));
            rest = &rest[close..];
        }
        out.push_str(rest);
        out
    }
}

/// `s` as a path segment or query value: everything but RFC 3986's unreserved characters
/// percent-encoded.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Defines each route as a constant, and [`ROUTES`] as all of them.
macro_rules! routes {
    ($($(#[$doc:meta])* $name:ident = $operation:literal $method:ident $path:literal;)*) => {
        $($(#[$doc])* pub const $name: Route = Route {
            operation: $operation,
            method: Method::$method,
            path: $path,
        };)*
        /// Every route the client calls.
        pub const ROUTES: &[Route] = &[$($name),*];
    };
}

routes! {
    /// Start an instance.
    INSTANCES_START = "instances_start" Post "/v1/instances";
    /// Start many.
    INSTANCES_START_BATCH = "instances_start_batch" Post "/v1/instances/batch";
    /// A page of instances.
    INSTANCES_LIST = "instances_list" Get "/v1/instances";
    /// One instance.
    INSTANCES_SHOW = "instances_show" Get "/v1/instances/{id}";
    /// A page of its history.
    INSTANCES_HISTORY = "instances_history" Get "/v1/instances/{id}/history";
    /// Signal it.
    INSTANCES_SIGNAL = "instances_signal" Post "/v1/instances/{id}/signals";
    /// Ask it to cancel.
    INSTANCES_CANCEL = "instances_cancel" Post "/v1/instances/{id}/cancel";
    /// Stop it at once.
    INSTANCES_TERMINATE = "instances_terminate" Post "/v1/instances/{id}/terminate";
    /// Wait for it (one long poll).
    INSTANCES_WAIT = "instances_wait" Get "/v1/instances/{id}/wait";
    /// Start a finished one afresh.
    INSTANCES_RESTART = "instances_restart" Post "/v1/instances/{id}/restart";
    /// Remove finished ones.
    INSTANCES_PURGE = "instances_purge" Post "/v1/instances/purge";
    /// Enqueue a task.
    TASKS_ENQUEUE = "tasks_enqueue" Post "/v1/tasks";
    /// Enqueue many.
    TASKS_ENQUEUE_BATCH = "tasks_enqueue_batch" Post "/v1/tasks/batch";
    /// Tasks, newest first.
    TASKS_LIST = "tasks_list" Get "/v1/tasks";
    /// One task.
    TASKS_SHOW = "tasks_show" Get "/v1/tasks/{id}";
    /// Wait for it (one long poll).
    TASKS_WAIT = "tasks_wait" Get "/v1/tasks/{id}/wait";
    /// Cancel it.
    TASKS_CANCEL = "tasks_cancel" Post "/v1/tasks/{id}/cancel";
    /// Run it again.
    TASKS_RETRY = "tasks_retry" Post "/v1/tasks/{id}/retry";
    /// Remove it.
    TASKS_DISCARD = "tasks_discard" Post "/v1/tasks/{id}/discard";
    /// Cancel many.
    TASKS_ACT_MANY_CANCEL = "tasks_act_many_cancel" Post "/v1/tasks/cancel";
    /// Run many again.
    TASKS_ACT_MANY_RETRY = "tasks_act_many_retry" Post "/v1/tasks/retry";
    /// Remove many.
    TASKS_ACT_MANY_DISCARD = "tasks_act_many_discard" Post "/v1/tasks/discard";
    /// Every queue.
    QUEUES_LIST = "queues_list" Get "/v1/queues";
    /// Pause one.
    QUEUES_PAUSE = "queues_pause" Post "/v1/queues/{name}/pause";
    /// Resume one.
    QUEUES_RESUME = "queues_resume" Post "/v1/queues/{name}/resume";
    /// Replace its limits.
    QUEUES_LIMIT = "queues_limit" Put "/v1/queues/{name}/limits";
    /// Append events.
    EVENTS_APPEND = "events_append" Post "/v1/events";
    /// Append CloudEvents.
    EVENTS_APPEND_CLOUDEVENTS = "events_append_cloudevents" Post "/v1/events/cloudevents";
    /// A page of events of one item.
    EVENTS_READ = "events_read" Get "/v1/events";
    /// A page of events of many items.
    EVENTS_QUERY = "events_query" Post "/v1/events/query";
    /// Follow events (Server-Sent Events).
    EVENTS_STREAM = "events_stream" Get "/v1/events/stream";
    /// Every stored workflow version.
    WORKFLOWS_LIST = "workflows_list" Get "/v1/workflows";
    /// Store a definition.
    WORKFLOWS_APPLY = "workflows_apply" Post "/v1/workflows";
    /// Check a definition.
    WORKFLOWS_VALIDATE = "workflows_validate" Post "/v1/workflows/validate";
    /// A stored version with its source.
    WORKFLOWS_SHOW = "workflows_show" Get "/v1/workflows/{namespace}/{name}";
    /// Delete versions.
    WORKFLOWS_DELETE = "workflows_delete" Delete "/v1/workflows/{namespace}/{name}";
    /// Claim attempts.
    WORKERS_CLAIM = "workers_claim" Post "/v1/workers/{worker}/claim";
    /// Renew leases.
    WORKERS_HEARTBEAT = "workers_heartbeat" Post "/v1/workers/{worker}/heartbeat";
    /// Report ends.
    WORKERS_COMPLETE = "workers_complete" Post "/v1/workers/{worker}/complete";
    /// Give attempts back.
    WORKERS_RELEASE = "workers_release" Post "/v1/workers/{worker}/release";
    /// Alive.
    SYSTEM_HEALTH = "system_health" Get "/healthz";
    /// Ready.
    SYSTEM_READY = "system_ready" Get "/readyz";
    /// What the server's runtime runs.
    SYSTEM_REGISTRY = "system_registry" Get "/v1/registry";
    /// Who asks.
    SYSTEM_WHOAMI = "system_whoami" Get "/v1/whoami";
    /// The fleet.
    SYSTEM_WORKERS = "system_workers" Get "/v1/workers";
    /// Work over time.
    SYSTEM_THROUGHPUT = "system_throughput" Get "/v1/stats/throughput";
    /// An instance live (Server-Sent Events).
    INSTANCES_STREAM = "instances_stream" Get "/v1/instances/{id}/stream";
    /// An instance's graph.
    INSTANCES_GRAPH = "instances_graph" Get "/v1/instances/{id}/graph.svg";
    /// A workflow version's graph.
    WORKFLOWS_GRAPH = "workflows_graph" Get "/v1/workflows/{namespace}/{name}/{version}/graph.svg";
    /// Every schedule.
    SCHEDULES_LIST = "schedules_list" Get "/v1/schedules";
    /// Create one.
    SCHEDULES_CREATE = "schedules_create" Post "/v1/schedules";
    /// One, its next ticks and latest fires.
    SCHEDULES_DESCRIBE = "schedules_describe" Get "/v1/schedules/{name}";
    /// Replace one.
    SCHEDULES_UPDATE = "schedules_update" Put "/v1/schedules/{name}";
    /// Delete one.
    SCHEDULES_DELETE = "schedules_delete" Delete "/v1/schedules/{name}";
    /// Pause one.
    SCHEDULES_PAUSE = "schedules_pause" Post "/v1/schedules/{name}/pause";
    /// Resume one.
    SCHEDULES_RESUME = "schedules_resume" Post "/v1/schedules/{name}/resume";
    /// Fire one now.
    SCHEDULES_TRIGGER = "schedules_trigger" Post "/v1/schedules/{name}/trigger";
    /// Fire a past range.
    SCHEDULES_BACKFILL = "schedules_backfill" Post "/v1/schedules/{name}/backfill";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_filled_with_escaped_segments() {
        assert_eq!(
            INSTANCES_SHOW.fill(&["order/7 x"]),
            "/v1/instances/order%2F7%20x"
        );
        assert_eq!(QUEUES_LIMIT.fill(&["mail"]), "/v1/queues/mail/limits");
        assert_eq!(escape("plain-id_1.2~"), "plain-id_1.2~");
        assert_eq!(INSTANCES_LIST.fill(&[]), "/v1/instances");
    }
}
