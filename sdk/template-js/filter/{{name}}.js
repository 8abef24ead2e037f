// A Sluice filter: keeps the records that have a key.
export function keep(record) {
  return record.key !== null;
}
