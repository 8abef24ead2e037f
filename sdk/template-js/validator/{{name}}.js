// A Sluice validator: refuses records that have no key.
// Return nothing to accept a record; a string, the reason, refuses it (and its whole batch).
export function validate(record) {
  if (record.key === null) return 'a record needs a key';
}
