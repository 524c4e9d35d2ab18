-- The group commit. `ratchet.` is replaced with the configured schema.

-- name: commit
SELECT * FROM ratchet.commit_batch(
    p_now => $1, p_notify => $2,
    t_instance => $3, t_fence => $4, t_execution => $5, t_version => $6,
    t_history_start => $7, t_history_count => $8, t_status => $9, t_output => $10,
    t_error => $11, t_custom_status => $12, t_next_input => $13,
    c_turn => $14, c_id => $15,
    h_turn => $16, h_seq => $17, h_events => $18,
    k_turn => $19, k_queue => $20, k_name => $21, k_input => $22, k_options => $23,
    k_seq => $24, k_visible_at => $25, k_priority => $26, k_unique_key => $27,
    k_metadata => $28, k_standalone => $29,
    b_turn => $30, b_kind => $31, b_event => $32, b_visible_at => $33,
    d_turn => $34, d_kind => $35, d_event => $36, d_visible_at => $37,
    n_turn => $38, n_id => $39, n_name => $40, n_input => $41, n_parent => $42,
    n_parent_seq => $43, n_started => $44, n_exists => $45,
    s_turn => $46, s_kind => $47, s_event => $48,
    p_task => $49, p_fence => $50, p_instance => $51, p_execution => $52, p_seq => $53,
    p_attempt => $54, p_outcome => $55, p_kind => $56, p_event => $57, p_output => $58,
    p_error => $59, p_at => $60,
    p_task_owner => $61, p_task_until => $62, p_task_capacity => $63,
    p_lock => $64, p_lock_owner => $65, p_lock_until => $66, t_incarnation => $67);
