// Row selection on list pages: the set of selected ids kept in step with the row check
// boxes and the select-all box.

/** Ticks every row box on or off, keeping `selected` (a Set of ids) in step. */
export function setAllBoxes(boxes, selected, on) {
  for (const b of boxes) {
    b.checked = on;
    if (on) selected.add(b.value);
    else selected.delete(b.value);
    b.closest('tr').classList.toggle('selected', on);
  }
}

/** Shows the select-all box (when there is one) as all, some or none of `total` selected. */
export function showSelectAll(selectAll, selected, total) {
  if (!selectAll) return;
  selectAll.checked = selected.size === total;
  selectAll.indeterminate = selected.size > 0 && selected.size < total;
}
