use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use ratchet_core::{
    boxed_orchestration, input_check, ActivityError, BoxedOrchestration, InputCheck,
    OrchestrationContext, OrchestrationError,
};
use ratchet_store::Registered;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::ActivityContext;

/// An activity with its types erased to JSON.
pub(crate) type BoxedActivity = Arc<
    dyn Fn(ActivityContext, Value) -> BoxFuture<'static, Result<Value, ActivityError>>
        + Send
        + Sync,
>;

#[derive(Clone)]
pub(crate) struct OrchestrationEntry {
    pub(crate) run: BoxedOrchestration,
    pub(crate) check: InputCheck,
}

/// The orchestrations and activities a process can run, by name.
#[derive(Clone, Default)]
pub struct Registry {
    orchestrations: HashMap<String, BTreeMap<u32, OrchestrationEntry>>,
    activities: HashMap<String, BoxedActivity>,
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
        let entry = OrchestrationEntry {
            run: boxed_orchestration(f),
            check: input_check::<I>(),
        };
        self.orchestrations
            .entry(name.to_string())
            .or_default()
            .insert(version, entry);
        self
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
            async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    ActivityError::non_retryable(
                        "InvalidInput",
                        format!("activity input is malformed: {e}"),
                    )
                })?;
                let output = f(ctx, input).await?;
                serde_json::to_value(output).map_err(|e| {
                    ActivityError::non_retryable(
                        "Payload",
                        format!("activity output does not serialize: {e}"),
                    )
                })
            }
            .boxed()
        });
        self.activities.insert(name.to_string(), boxed);
        self
    }

    /// True when an orchestration of this name is registered.
    pub fn has_orchestration(&self, name: &str) -> bool {
        self.orchestrations.contains_key(name)
    }

    /// True when an activity of this name is registered.
    pub fn has_activity(&self, name: &str) -> bool {
        self.activities.contains_key(name)
    }

    pub(crate) fn orchestration_entry(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Option<(u32, &OrchestrationEntry)> {
        let versions = self.orchestrations.get(name)?;
        match version {
            Some(v) => versions.get(&v).map(|e| (v, e)),
            None => versions.iter().next_back().map(|(v, e)| (*v, e)),
        }
    }

    pub(crate) fn activity_fn(&self, name: &str) -> Option<BoxedActivity> {
        self.activities.get(name).cloned()
    }

    pub(crate) fn registered_orchestrations(&self) -> Vec<Registered> {
        self.orchestrations
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
