// Empty states that say how to start something: the CLI command and the same over HTTP.

import { h } from './dom.js';
import { session } from './api.js';
import { copyButton } from './copy.js';

/** A command in a copyable block. */
export function command(text) {
  return h('div', { class: 'command' }, h('code', { class: 'mono' }, text), copyButton(text, 'command'));
}

function curlAuth() {
  return session.auth ? ' -H "Authorization: Bearer $RATCHET_TOKEN"' : '';
}

/** An empty state: a title, a sentence, and commands to copy. */
export function emptyState({ title, text, commands = [], testid = 'empty-state' }) {
  return h('div', { class: 'empty', 'data-testid': testid },
    h('p', { class: 'empty-title' }, title),
    text ? h('p', { class: 'muted' }, text) : null,
    commands.map(command));
}

/** How to start an instance, by CLI and curl. */
export function startCommands(name = 'order') {
  const input = name === 'fanout' ? '{"activities":5,"activity_ms":10}' : '{"id":"o-1","items":["book"],"amount_cents":1200}';
  return [
    `ratchet instances start ${name} --input '${input}'`,
    `curl -s ${location.origin}/v1/instances${curlAuth()} -H 'content-type: application/json' -d '{"name":"${name}","input":${input}}'`,
  ];
}

/** How to enqueue a task, by CLI and curl. */
export function enqueueCommands(queue = 'default') {
  return [
    `ratchet tasks enqueue work --queue ${queue} --input '{"ms":10}'`,
    `curl -s ${location.origin}/v1/tasks${curlAuth()} -H 'content-type: application/json' -d '{"name":"work","input":{"ms":10},"options":{"queue":"${queue}"}}'`,
  ];
}

/** How to append an event, by CLI and curl. */
export function appendCommands() {
  return [
    `ratchet events append --type Enrolled --tag course:c1 --payload '{"student":"s-1"}'`,
    `curl -s ${location.origin}/v1/events${curlAuth()} -H 'content-type: application/json' -d '{"events":[{"type":"Enrolled","tags":["course:c1"],"payload":{"student":"s-1"}}]}'`,
  ];
}
