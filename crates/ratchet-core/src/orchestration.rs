use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{OrchestrationContext, OrchestrationError};

/// An orchestration with its input and output types erased to JSON, as the registry keeps it.
pub type BoxedOrchestration = Arc<
    dyn Fn(OrchestrationContext, Value) -> BoxFuture<'static, Result<Value, OrchestrationError>>
        + Send
        + Sync,
>;

/// Erases the types of an orchestration written as `async fn(ctx, input) -> Result<Out, _>`.
pub fn boxed_orchestration<I, O, F, Fut>(f: F) -> BoxedOrchestration
where
    I: DeserializeOwned + Send + 'static,
    O: Serialize + Send + 'static,
    F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, OrchestrationError>> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |ctx, input: Value| {
        let f = f.clone();
        async move {
            let input: I =
                serde_json::from_value(input).map_err(|e| OrchestrationError::Payload {
                    message: format!("orchestration input is malformed: {e}"),
                })?;
            let output = f(ctx, input).await?;
            serde_json::to_value(output).map_err(|e| OrchestrationError::Payload {
                message: format!("orchestration output does not serialize: {e}"),
            })
        }
        .boxed()
    })
}

/// Checks that a JSON payload decodes to `I`, so a malformed start is refused before anything
/// is written.
pub type InputCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// The [`InputCheck`] for type `I`.
pub fn input_check<I: DeserializeOwned>() -> InputCheck {
    Arc::new(|v: &Value| I::deserialize(v).map(|_| ()).map_err(|e| e.to_string()))
}
