use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::future::BoxFuture;
use futures::FutureExt;
use ratchet_core::{
    boxed_orchestration, input_check, ActivityError, BoxedOrchestration, InputCheck,
    OrchestrationContext, OrchestrationError, TaskError,
};
use ratchet_store::Registered;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{ActivityContext, TaskContext};

/// An activity with its types erased to JSON.
pub(crate) type BoxedActivity = Arc<
    dyn Fn(ActivityContext, Value) -> BoxFuture<'static, Result<Value, ActivityError>>
        + Send
        + Sync,
>;

/// A task handler with its types erased to JSON.
pub(crate) type BoxedTask =
    Arc<dyn Fn(TaskContext, Value) -> BoxFuture<'static, Result<Value, TaskError>> + Send + Sync>;

#[derive(Clone)]
pub(crate) struct TaskEntry {
    pub(crate) run: BoxedTask,
    pub(crate) check: InputCheck,
}

#[derive(Clone)]
pub(crate) struct OrchestrationEntry {
    pub(crate) run: BoxedOrchestration,
    pub(crate) check: InputCheck,
}

/// The names a [`Registry`] holds, sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisteredNames {
    /// Orchestration names with their registered versions, in ascending order.
    pub orchestrations: Vec<(String, Vec<u32>)>,
    /// Activity names.
    pub activities: Vec<String>,
    /// Standalone task names.
    pub tasks: Vec<String>,
    /// Whether orchestrations here may call activities no handler here runs (workers
    /// elsewhere claim them by name, over HTTP): see [`Registry::activities_elsewhere`].
    pub activities_elsewhere: bool,
}

/// The orchestrations, activities and tasks a process can run, by name.
///
/// Orchestrations may also be added while the runtime runs
/// ([`Registry::add_orchestration_version`]): the clones of a registry share them, so the
/// runtime's and its client's see every one added (a declarative workflow applied later).
#[derive(Clone, Default)]
pub struct Registry {
    orchestrations: Arc<Orchestrations>,
    activities: HashMap<String, BoxedActivity>,
    tasks: HashMap<String, TaskEntry>,
    activities_elsewhere: bool,
}

/// Orchestrations by name and version, and how many times they changed.
#[derive(Default)]
struct Orchestrations {
    by_name: RwLock<HashMap<String, BTreeMap<u32, OrchestrationEntry>>>,
    changes: AtomicU64,
}

type ByName = HashMap<String, BTreeMap<u32, OrchestrationEntry>>;

impl Orchestrations {
    fn read(&self) -> RwLockReadGuard<'_, ByName> {
        self.by_name.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, ByName> {
        self.by_name.write().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, name: &str, version: u32, entry: OrchestrationEntry) {
        self.write()
            .entry(name.to_string())
            .or_default()
            .insert(version, entry);
        self.changes.fetch_add(1, Ordering::Release);
    }
}

/// Decodes a handler's input and encodes its output, as non-retryable errors when they fail.
async fn typed<I, O, Fut>(
    what: &str,
    input: Value,
    call: impl FnOnce(I) -> Fut,
) -> Result<Value, ActivityError>
where
    I: DeserializeOwned,
    O: Serialize,
    Fut: Future<Output = Result<O, ActivityError>>,
{
    let input: I = serde_json::from_value(input).map_err(|e| {
        ActivityError::non_retryable("InvalidInput", format!("{what} input is malformed: {e}"))
    })?;
    let output = call(input).await?;
    serde_json::to_value(output).map_err(|e| {
        ActivityError::non_retryable("Payload", format!("{what} output does not serialize: {e}"))
    })
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers version 1 of an orchestration written as
    /// `async fn(OrchestrationContext, In) -> Result<Out, OrchestrationError>`.
    pub fn orchestration<I, O, F, Fut>(&mut self, name: &str, f: F) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, OrchestrationError>> + Send + 'static,
    {
        self.orchestration_version(name, 1, f)
    }

    /// Registers one version of an orchestration. New instances run the highest registered
    /// version; an instance keeps the version it started on for its whole life.
    pub fn orchestration_version<I, O, F, Fut>(
        &mut self,
        name: &str,
        version: u32,
        f: F,
    ) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, OrchestrationError>> + Send + 'static,
    {
        self.add_orchestration_version(name, version, f);
        self
    }

    /// Adds one version of an orchestration to a registry in use: the runtime claims its
    /// instances from its next poll. Every clone of this registry sees it.
    pub fn add_orchestration_version<I, O, F, Fut>(&self, name: &str, version: u32, f: F)
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, OrchestrationError>> + Send + 'static,
    {
        let entry = OrchestrationEntry {
            run: boxed_orchestration(f),
            check: input_check::<I>(),
        };
        self.orchestrations.insert(name, version, entry);
    }

    /// How many times orchestrations were added: what a poll compares to know its list of
    /// names is stale.
    pub(crate) fn orchestration_changes(&self) -> u64 {
        self.orchestrations.changes.load(Ordering::Acquire)
    }

    /// Registers an activity written as `async fn(ActivityContext, In) -> Result<Out, ActivityError>`.
    pub fn activity<I, O, F, Fut>(&mut self, name: &str, f: F) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ActivityContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, ActivityError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let boxed: BoxedActivity = Arc::new(move |ctx, input: Value| {
            let f = f.clone();
            async move { typed("activity", input, |i| f(ctx, i)).await }.boxed()
        });
        self.activities.insert(name.to_string(), boxed);
        self
    }

    /// Registers a standalone task handler written as
    /// `async fn(TaskContext, In) -> Result<Out, TaskError>`. Enqueueing checks the input
    /// decodes as `In`.
    pub fn task<I, O, F, Fut>(&mut self, name: &str, f: F) -> &mut Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(TaskContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, TaskError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let run: BoxedTask = Arc::new(move |ctx, input: Value| {
            let f = f.clone();
            async move { typed("task", input, |i| f(ctx, i)).await }.boxed()
        });
        self.tasks.insert(
            name.to_string(),
            TaskEntry {
                run,
                check: input_check::<I>(),
            },
        );
        self
    }

    /// Everything registered, by name, sorted: what a server or a console shows.
    pub fn names(&self) -> RegisteredNames {
        let mut orchestrations: Vec<(String, Vec<u32>)> = self
            .orchestrations
            .read()
            .iter()
            .map(|(name, v)| (name.clone(), v.keys().copied().collect()))
            .collect();
        orchestrations.sort();
        let mut activities = self.activity_names();
        activities.sort();
        let mut tasks = self.task_names();
        tasks.sort();
        RegisteredNames {
            orchestrations,
            activities,
            tasks,
            activities_elsewhere: self.activities_elsewhere,
        }
    }

    /// Lets orchestrations here call activities of any name: the ones not registered here
    /// wait in the activity queue for a worker elsewhere that runs them (one claiming them by
    /// name over HTTP), under the activity's timeouts and retries like any other. Without
    /// it, calling an activity not registered here fails the orchestration
    /// (`UnknownActivity`), since nothing would ever run it.
    pub fn activities_elsewhere(&mut self) -> &mut Self {
        self.activities_elsewhere = true;
        self
    }

    /// True when orchestrations here may call `name`: registered here, or run elsewhere.
    pub fn routes_activity(&self, name: &str) -> bool {
        self.activities_elsewhere || self.has_activity(name)
    }

    /// Whether [`Self::activities_elsewhere`] was asked for: without it, every activity this
    /// process's orchestrations call is registered here.
    pub(crate) fn calls_activities_elsewhere(&self) -> bool {
        self.activities_elsewhere
    }

    /// True when a task of this name is registered.
    pub fn has_task(&self, name: &str) -> bool {
        self.tasks.contains_key(name)
    }

    pub(crate) fn task_entry(&self, name: &str) -> Option<&TaskEntry> {
        self.tasks.get(name)
    }

    pub(crate) fn task_names(&self) -> Vec<String> {
        self.tasks.keys().cloned().collect()
    }

    /// True when an orchestration of this name is registered.
    pub fn has_orchestration(&self, name: &str) -> bool {
        self.orchestrations.read().contains_key(name)
    }

    /// True when an activity of this name is registered.
    pub fn has_activity(&self, name: &str) -> bool {
        self.activities.contains_key(name)
    }

    pub(crate) fn orchestration_entry(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Option<(u32, OrchestrationEntry)> {
        let all = self.orchestrations.read();
        let versions = all.get(name)?;
        match version {
            Some(v) => versions.get(&v).map(|e| (v, e.clone())),
            None => versions.iter().next_back().map(|(v, e)| (*v, e.clone())),
        }
    }

    pub(crate) fn activity_fn(&self, name: &str) -> Option<BoxedActivity> {
        self.activities.get(name).cloned()
    }

    pub(crate) fn registered_orchestrations(&self) -> Vec<Registered> {
        self.orchestrations
            .read()
            .iter()
            .map(|(name, v)| Registered {
                name: name.clone(),
                versions: v.keys().copied().collect(),
            })
            .collect()
    }

    pub(crate) fn activity_names(&self) -> Vec<String> {
        self.activities.keys().cloned().collect()
    }
}
