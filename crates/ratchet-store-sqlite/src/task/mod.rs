//! Tasks: activity attempts and standalone tasks in one hot table, finished standalone tasks
//! in `task_results`.

mod action;
mod claim;
mod complete;
mod insert;
mod record;

pub(crate) use action::{act, purge};
pub(crate) use claim::{claim, heartbeat, release};
pub(crate) use complete::complete;
pub(crate) use insert::{enqueue, insert_activity};
pub(crate) use record::{get, list};
