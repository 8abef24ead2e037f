// Partition by one field of a JSON value: records with the same `customer_id`
// land together even when their keys differ.
//
// The JavaScript twin of plugins/json-field (same parameter, same partitions on
// plugins/testdata/json-field-partitioner.json). Parameter: `field` (required),
// a path such as `$.customer_id`. The field's bytes (a string's contents as
// written, or a number's literal) are hashed like a Java client key:
// `toPositive(murmur2(bytes)) % partitions`. Records whose value is missing,
// not JSON, or lacks the field (or holds `null`) fall back to the key's
// murmur2, then to partition 0.

import { InvalidParams, Path, murmur2Partition } from '../../sdk/js/sluice-sdk.js';

export function init(params) {
  params.only(['field']);
  const field = params.require('field');
  try {
    return new Path(field);
  } catch (e) {
    throw new InvalidParams(`parameter \`field\`: ${e.message}`);
  }
}

export function partition(path, record, partitionCount) {
  const bytes = (record.value === null ? null : path.find(record.value)) ?? record.key;
  return bytes === null ? 0 : murmur2Partition(bytes, partitionCount);
}
