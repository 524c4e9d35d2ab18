-- The group commit. `ratchet.` is replaced with the configured schema.

-- name: commit
SELECT * FROM ratchet.commit_batch(
    p_now => $1, p_notify => $2,
    t_instance => $3, t_fence => $4, t_execution => $5, t_version => $6,
    t_history_start => $7, t_history_count => $8, t_status => $9, t_output => $10,
    t_error => $11, t_custom_status => $12, t_next_input => $13,
    c_turn => $14, c_id => $15,
    h_turn => $16, h_seq => $17, h_event => $18,
    k_turn => $19, k_name => $20, k_input => $21, k_options => $22, k_seq => $23,
    k_visible_at => $24,
    b_turn => $25, b_kind => $26, b_event => $27, b_visible_at => $28,
    d_turn => $29, d_kind => $30, d_event => $31, d_visible_at => $32,
    n_turn => $33, n_id => $34, n_name => $35, n_input => $36, n_parent => $37,
    n_parent_seq => $38, n_started => $39, n_exists => $40,
    s_turn => $41, s_kind => $42, s_event => $43,
    p_task => $44, p_fence => $45, p_instance => $46, p_execution => $47, p_seq => $48,
    p_attempt => $49, p_kind => $50, p_event => $51, p_retry_at => $52, p_error => $53,
    p_task_owner => $54, p_task_until => $55, p_task_capacity => $56,
    p_lock => $57, p_lock_owner => $58, p_lock_until => $59);
