//! What tasks ran, in order, per instance: the interpreter says so in a `tracing` event
//! (target `ratchet_workflow::task`) each time a task runs (not when it is replayed), and
//! this test process keeps them.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

static RAN: Mutex<Option<HashMap<String, Vec<String>>>> = Mutex::new(None);
static INSTALL: Once = Once::new();

struct Recorder;

#[derive(Default)]
struct Fields {
    instance: String,
    task: String,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        match field.name() {
            "instance" => self.instance = format!("{value:?}"),
            "task" => self.task = format!("{value:?}"),
            _ => {}
        }
    }
}

impl<S: Subscriber> Layer<S> for Recorder {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut ran = RAN.lock().unwrap();
        ran.get_or_insert_with(HashMap::new)
            .entry(fields.instance)
            .or_default()
            .push(fields.task);
    }
}

/// Starts keeping what runs (once per process).
pub fn record() {
    INSTALL.call_once(|| {
        let only = Targets::new().with_target("ratchet_workflow::task", Level::DEBUG);
        let subscriber = tracing_subscriber::registry().with(Recorder.with_filter(only));
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
}

/// The tasks `instance` ran, in order.
pub fn tasks(instance: &str) -> Vec<String> {
    RAN.lock()
        .unwrap()
        .as_ref()
        .and_then(|r| r.get(instance).cloned())
        .unwrap_or_default()
}
