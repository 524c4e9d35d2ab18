// Status badges coloured like the instance graph: completed green, running blue, failed red,
// pending grey; cancelled and retrying amber.

import { h } from './dom.js';

export const INSTANCE_STATUSES = ['Pending', 'Running', 'Completed', 'Failed', 'Cancelled', 'Terminated', 'ContinuedAsNew'];
export const TASK_STATES = ['Scheduled', 'Available', 'Running', 'Retrying', 'Completed', 'Dead', 'Cancelled'];
export const FINISHED = new Set(['Completed', 'Failed', 'Cancelled', 'Terminated']);

const TONE = {
  pending: 'pending',
  scheduled: 'pending',
  available: 'available',
  running: 'running',
  continuedasnew: 'running',
  completed: 'completed',
  failed: 'failed',
  dead: 'failed',
  terminated: 'failed',
  cancelled: 'cancelled',
  retrying: 'cancelled',
  skipped: 'skipped',
};

/** The colour family of a status or state (`completed`, `running`, ...). */
export function tone(status) {
  return TONE[String(status).toLowerCase()] || 'pending';
}

/** A badge for an instance status or task state. */
export function badge(status, attrs = {}, text = null) {
  const label = text ? text : status === 'ContinuedAsNew' ? 'Continued as new' : status === 'Dead' ? 'Dead letter' : String(status);
  return h('span', {
    class: `badge status-${tone(status)}`,
    'data-testid': 'status-badge',
    'data-status': status,
    ...attrs,
  }, label);
}
