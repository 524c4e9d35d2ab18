//! Any operation by its name, with JSON in and out: for callers that hold the API as data
//! (the Python module's native client), so that they call the same [`Api`] with the same
//! types as every other edge, and need no method of their own per operation.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::api::Api;
use crate::problem::{ApiError, ProblemBody};
use crate::tasks::TaskAct;

/// The arguments of one call: the path's segments in order, the query and the body as JSON
/// (`null` when the operation takes none).
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The path's `{…}` segments, in order.
    pub segments: Vec<String>,
    /// The query parameters, as an object.
    pub query: Value,
    /// The body.
    pub body: Value,
}

impl Call {
    fn segment(&self, n: usize, name: &str) -> Result<&str, ApiError> {
        self.segments.get(n).map(String::as_str).ok_or_else(|| {
            ApiError::from(ProblemBody::bad_request(format!(
                "the path needs its {name}"
            )))
        })
    }

    fn task_id(&self) -> Result<i64, ApiError> {
        let id = self.segment(0, "id")?;
        id.parse().map_err(|_| {
            ApiError::from(ProblemBody::invalid(format!("{id:?} is not a task id")).field("id"))
        })
    }

    fn query<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        read(&self.query, "query")
    }

    fn body<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        read(&self.body, "body")
    }
}

/// A JSON value as `T`; `null` reads as an empty object (no parameters).
fn read<T: DeserializeOwned>(value: &Value, what: &str) -> Result<T, ApiError> {
    let value = if value.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        value.clone()
    };
    // Read as the server reads a request: strictly, naming the field at fault under `what`.
    crate::json::from_value(&value)
        .map_err(|e| e.refield(|f| f.map_or_else(|| what.to_string(), |f| format!("{what}.{f}"))))
}

fn answer(value: impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value)
        .map_err(|e| ApiError::from(ProblemBody::internal(format!("writing the answer: {e}"))))
}

/// Calls `operation` (its OpenAPI `operationId`) on `api`, and answers its response as JSON
/// (`null` for none). The streams (`events_stream`, `instances_stream`) are not calls: follow
/// them with their methods.
pub async fn dispatch(api: &dyn Api, operation: &str, call: &Call) -> Result<Value, ApiError> {
    let c = call;
    match operation {
        "instances_start" => answer(api.instances_start(&c.body()?, c.query()?).await?),
        "instances_start_batch" => answer(api.instances_start_batch(&c.body()?, c.query()?).await?),
        "instances_list" => answer(api.instances_list(&c.query()?).await?),
        "instances_show" => answer(api.instances_show(c.segment(0, "id")?).await?),
        "instances_history" => answer(
            api.instances_history(c.segment(0, "id")?, &c.query()?)
                .await?,
        ),
        "instances_signal" => answer(
            api.instances_signal(c.segment(0, "id")?, &c.body()?)
                .await?,
        ),
        "instances_cancel" => answer(
            api.instances_cancel(c.segment(0, "id")?, &c.body()?)
                .await?,
        ),
        "instances_terminate" => answer(
            api.instances_terminate(c.segment(0, "id")?, &c.body()?)
                .await?,
        ),
        "instances_wait" => answer(api.instances_wait(c.segment(0, "id")?, c.query()?).await?),
        "instances_restart" => answer(api.instances_restart(c.segment(0, "id")?).await?),
        "instances_purge" => answer(api.instances_purge(&c.body()?).await?),
        "instances_graph" => answer(api.instances_graph(c.segment(0, "id")?).await?),
        "tasks_enqueue" => answer(api.tasks_enqueue(&c.body()?, c.query()?).await?),
        "tasks_enqueue_batch" => answer(api.tasks_enqueue_batch(&c.body()?, c.query()?).await?),
        "tasks_list" => answer(api.tasks_list(&c.query()?).await?),
        "tasks_show" => answer(api.tasks_show(c.task_id()?).await?),
        "tasks_wait" => answer(api.tasks_wait(c.task_id()?, c.query()?).await?),
        "tasks_cancel" => answer(api.tasks_act(c.task_id()?, TaskAct::Cancel).await?),
        "tasks_retry" => answer(api.tasks_act(c.task_id()?, TaskAct::Retry).await?),
        "tasks_discard" => answer(api.tasks_act(c.task_id()?, TaskAct::Discard).await?),
        "tasks_act_many_cancel" => answer(api.tasks_act_many(&c.body()?, TaskAct::Cancel).await?),
        "tasks_act_many_retry" => answer(api.tasks_act_many(&c.body()?, TaskAct::Retry).await?),
        "tasks_act_many_discard" => answer(api.tasks_act_many(&c.body()?, TaskAct::Discard).await?),
        "queues_list" => answer(api.queues_list().await?),
        "queues_pause" => answer(api.queues_pause(c.segment(0, "name")?).await?),
        "queues_resume" => answer(api.queues_resume(c.segment(0, "name")?).await?),
        "queues_limit" => answer(api.queues_limit(c.segment(0, "name")?, &c.body()?).await?),
        "events_append" => answer(api.events_append(&c.body()?).await?),
        "events_append_cloudevents" => answer(api.events_append_cloudevents(&c.body()?).await?),
        "events_read" => answer(api.events_read(&c.query()?).await?),
        "events_query" => answer(api.events_query(&c.body()?).await?),
        "workflows_list" => answer(api.workflows_list().await?),
        "workflows_apply" => answer(api.workflows_apply(&c.body()?).await?),
        "workflows_validate" => answer(api.workflows_validate(&c.body()?).await?),
        "workflows_show" => answer(
            api.workflows_show(
                c.segment(0, "namespace")?,
                c.segment(1, "name")?,
                &c.query()?,
            )
            .await?,
        ),
        "workflows_delete" => answer(
            api.workflows_delete(
                c.segment(0, "namespace")?,
                c.segment(1, "name")?,
                &c.query()?,
            )
            .await?,
        ),
        "workflows_graph" => answer(
            api.workflows_graph(
                c.segment(0, "namespace")?,
                c.segment(1, "name")?,
                c.segment(2, "version")?,
            )
            .await?,
        ),
        "schedules_list" => answer(api.schedules_list().await?),
        "schedules_create" => answer(api.schedules_create(&c.body()?).await?),
        "schedules_describe" => answer(
            api.schedules_describe(c.segment(0, "name")?, c.query()?)
                .await?,
        ),
        "schedules_update" => answer(
            api.schedules_update(c.segment(0, "name")?, &c.body()?)
                .await?,
        ),
        "schedules_delete" => answer(api.schedules_delete(c.segment(0, "name")?).await?),
        "schedules_pause" => answer(
            api.schedules_pause(c.segment(0, "name")?, &c.body()?)
                .await?,
        ),
        "schedules_resume" => answer(api.schedules_resume(c.segment(0, "name")?).await?),
        "schedules_trigger" => answer(api.schedules_trigger(c.segment(0, "name")?).await?),
        "schedules_backfill" => answer(
            api.schedules_backfill(c.segment(0, "name")?, &c.body()?)
                .await?,
        ),
        "workers_claim" => answer(
            api.workers_claim(c.segment(0, "worker")?, &c.body()?)
                .await?,
        ),
        "workers_heartbeat" => answer(
            api.workers_heartbeat(c.segment(0, "worker")?, &c.body()?)
                .await?,
        ),
        "workers_complete" => answer(
            api.workers_complete(c.segment(0, "worker")?, &c.body()?)
                .await?,
        ),
        "workers_release" => answer(
            api.workers_release(c.segment(0, "worker")?, &c.body()?)
                .await?,
        ),
        "system_health" => answer(api.system_health().await?),
        "system_ready" => answer(api.system_ready().await?),
        "system_registry" => answer(api.system_registry().await?),
        "system_whoami" => answer(api.system_whoami().await?),
        "system_workers" => answer(api.system_workers().await?),
        "system_throughput" => answer(api.system_throughput(c.query()?).await?),
        "events_stream" | "instances_stream" => {
            Err(ProblemBody::bad_request(format!("{operation} is a stream, not a call")).into())
        }
        other => Err(ProblemBody::not_found(format!("no operation {other:?}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_field_is_named_by_its_path() {
        let body = serde_json::json!({"tasks": [{"name": "a", "options": {"priority": 100000}}]});
        let e = read::<crate::tasks::EnqueueBatch>(&body, "body").err();
        let field = e.as_ref().and_then(|e| e.problem()?.field.clone());
        assert_eq!(
            field.as_deref(),
            Some("body.tasks[0].options.priority"),
            "{e:?}"
        );
    }
}
