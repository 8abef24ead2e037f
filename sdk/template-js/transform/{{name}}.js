// A Sluice transform: passes every record through unchanged. Call
// `out.push(key, value, headers, timestamp)` to emit something else, or nothing
// to drop the record.
export function transform(record, out) {
  out.keep(record);
}
