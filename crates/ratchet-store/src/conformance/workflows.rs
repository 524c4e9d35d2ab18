//! Declarative workflow definitions: stored by version, deleted by version or whole, and
//! never deleted from under the instances that run them unless forced.

use std::time::Duration;

use super::*;
use crate::{NewWorkflow, StopOutcome, StoreError, WorkflowPut, WorkflowRecord};

/// A workflow version is stored once: the same source again changes nothing, other content
/// under the same version is refused, and each new version gets the next revision.
pub async fn workflows_are_stored_by_version(store: &dyn Store) {
    let def = |name: &str, version: &str, hash: &str| NewWorkflow {
        namespace: "shop".into(),
        name: name.into(),
        version: version.into(),
        hash: hash.into(),
        source: format!("source of {name} {version} {hash}"),
    };
    let put = |w: NewWorkflow| async move { store.workflow_put(w, T0).await.unwrap() };
    assert_eq!(
        put(def("order", "1.0.0", "h1")).await,
        WorkflowPut::Created(1)
    );
    assert_eq!(
        put(def("order", "1.0.0", "h1")).await,
        WorkflowPut::Unchanged(1)
    );
    assert_eq!(
        put(def("order", "1.0.0", "h2")).await,
        WorkflowPut::Conflict {
            revision: 1,
            hash: "h1".into()
        }
    );
    assert_eq!(
        put(def("order", "1.1.0", "h2")).await,
        WorkflowPut::Created(2)
    );
    assert_eq!(
        put(def("refund", "1.0.0", "h3")).await,
        WorkflowPut::Created(1)
    );
    let all = store.workflow_list(None, None).await.unwrap();
    assert_eq!(
        all.iter()
            .map(|w| (w.name.as_str(), w.version.as_str(), w.revision))
            .collect::<Vec<_>>(),
        [
            ("order", "1.0.0", 1),
            ("order", "1.1.0", 2),
            ("refund", "1.0.0", 1)
        ]
    );
    assert_eq!(all[1].source, "source of order 1.1.0 h2");
    assert_eq!(all[1].created_at, T0);
    let orders = store
        .workflow_list(Some("shop"), Some("order"))
        .await
        .unwrap();
    assert_eq!(orders.len(), 2);
    assert!(store
        .workflow_list(Some("other"), None)
        .await
        .unwrap()
        .is_empty());
}

fn order(version: &str, hash: &str) -> NewWorkflow {
    NewWorkflow {
        namespace: "shop".into(),
        name: "order".into(),
        version: version.into(),
        hash: hash.into(),
        source: format!("source of order {version}"),
    }
}

/// The `(version, revision)`s of `records`.
fn versions(records: &[WorkflowRecord]) -> Vec<(&str, u32)> {
    records
        .iter()
        .map(|w| (w.version.as_str(), w.revision))
        .collect()
}

/// What is stored of shop/order, as `(version, revision)`s.
async fn stored_orders(store: &dyn Store) -> Vec<(String, u32)> {
    let stored = store
        .workflow_list(Some("shop"), Some("order"))
        .await
        .unwrap();
    versions(&stored)
        .into_iter()
        .map(|(v, r)| (v.to_string(), r))
        .collect()
}

fn owned(pairs: &[(&str, u32)]) -> Vec<(String, u32)> {
    pairs.iter().map(|(v, r)| (v.to_string(), *r)).collect()
}

/// One version or every version of a workflow is deleted and returned; an unknown name or
/// version is not found; a deleted revision's number is never given again.
pub async fn workflows_are_deleted_by_version_or_whole(store: &dyn Store) {
    for (version, hash) in [("1.0.0", "h1"), ("1.1.0", "h2"), ("1.2.0", "h3")] {
        assert!(matches!(
            store.workflow_put(order(version, hash), T0).await.unwrap(),
            WorkflowPut::Created(_)
        ));
    }
    let refund = NewWorkflow {
        name: "refund".into(),
        ..order("1.0.0", "h4")
    };
    store.workflow_put(refund, T0).await.unwrap();

    let deleted = store
        .workflow_delete("shop", "order", Some("1.1.0"), false)
        .await
        .unwrap();
    assert_eq!(versions(&deleted), [("1.1.0", 2)]);
    assert_eq!(deleted[0].source, "source of order 1.1.0");
    assert_eq!(deleted[0].hash, "h2");
    assert_eq!(
        stored_orders(store).await,
        owned(&[("1.0.0", 1), ("1.2.0", 3)])
    );

    for (namespace, name, version) in [
        ("shop", "order", Some("1.1.0")),
        ("shop", "nobody", None),
        ("other", "order", None),
    ] {
        match store.workflow_delete(namespace, name, version, false).await {
            Err(StoreError::NotFound(what)) => {
                assert!(what.contains(&format!("{namespace}/{name}")), "{what}")
            }
            other => panic!("{namespace}/{name} {version:?}: {other:?}"),
        }
    }

    let deleted = store
        .workflow_delete("shop", "order", None, false)
        .await
        .unwrap();
    assert_eq!(versions(&deleted), [("1.0.0", 1), ("1.2.0", 3)]);
    assert!(stored_orders(store).await.is_empty());
    assert!(matches!(
        store.workflow_delete("shop", "order", None, false).await,
        Err(StoreError::NotFound(_))
    ));
    let left = store.workflow_list(None, None).await.unwrap();
    assert_eq!(
        left.iter()
            .map(|w| (w.name.as_str(), w.revision))
            .collect::<Vec<_>>(),
        [("refund", 1)],
        "other workflows stay"
    );

    // Applied again, a deleted version gets a new number: a worker holding revision 1 or 3
    // in memory must never take a new definition for it.
    assert_eq!(
        store.workflow_put(order("1.0.0", "h1"), T0).await.unwrap(),
        WorkflowPut::Created(4)
    );
    assert_eq!(
        store.workflow_put(order("2.0.0", "h5"), T0).await.unwrap(),
        WorkflowPut::Created(5)
    );
    store
        .workflow_delete("shop", "order", Some("2.0.0"), false)
        .await
        .unwrap();
    assert_eq!(
        store.workflow_put(order("2.1.0", "h6"), T0).await.unwrap(),
        WorkflowPut::Created(6),
        "the newest revision deleted, its number is not given again either"
    );
}

/// A delete is refused, nothing deleted, while an unfinished instance runs on a revision it
/// would delete (or waits for its first turn with no revision left to run), and goes
/// through with force.
pub async fn workflow_delete_refuses_while_instances_run_on_it(store: &dyn Store) {
    store.workflow_put(order("1.0.0", "h1"), T0).await.unwrap();
    store.workflow_put(order("1.1.0", "h2"), T0).await.unwrap();
    store
        .instance_create(vec![new_instance("o1", "shop/order")], None, T0)
        .await
        .unwrap();
    let claimed = store
        .instance_claim(InstanceClaim {
            lease: lease("p", T0.plus(Duration::from_secs(30))),
            limit: 10,
            orchestrations: vec![Registered {
                name: "shop/order".into(),
                versions: vec![1, 2],
            }],
            now: T0,
            tasks: None,
        })
        .await
        .unwrap()
        .instances;
    assert_eq!(claimed.len(), 1);
    let mut running = turn(&claimed[0], InstanceStatus::Running);
    running.version = Some(2);
    store.commit(batch(vec![running])).await.unwrap();
    let o1 = store.instance_get("o1").await.unwrap().unwrap();
    assert_eq!((o1.status, o1.version), (InstanceStatus::Running, Some(2)));

    // Nothing runs on revision 1.
    let deleted = store
        .workflow_delete("shop", "order", Some("1.0.0"), false)
        .await
        .unwrap();
    assert_eq!(versions(&deleted), [("1.0.0", 1)]);

    let in_use = |version: Option<&'static str>| async move {
        match store.workflow_delete("shop", "order", version, false).await {
            Err(StoreError::InUse {
                workflow,
                instances,
            }) => {
                assert!(workflow.starts_with("shop/order"), "{workflow}");
                instances
            }
            other => panic!("{version:?}: expected InUse, got {other:?}"),
        }
    };
    assert_eq!(in_use(Some("1.1.0")).await, 1, "o1 runs on revision 2");
    assert_eq!(in_use(None).await, 1);
    assert_eq!(stored_orders(store).await, owned(&[("1.1.0", 2)]));

    // An instance not yet pinned to a revision would have none left to run.
    store
        .instance_create(vec![new_instance("o2", "shop/order")], None, T0)
        .await
        .unwrap();
    assert_eq!(in_use(None).await, 2);
    // A finished instance holds nothing.
    assert_eq!(
        store.instance_terminate("o1", "done", T0).await.unwrap(),
        StopOutcome::Done
    );
    assert_eq!(in_use(Some("1.1.0")).await, 1, "o2 has no revision yet");
    assert_eq!(stored_orders(store).await, owned(&[("1.1.0", 2)]));

    let deleted = store
        .workflow_delete("shop", "order", None, true)
        .await
        .unwrap();
    assert_eq!(versions(&deleted), [("1.1.0", 2)]);
    assert!(stored_orders(store).await.is_empty());
}
