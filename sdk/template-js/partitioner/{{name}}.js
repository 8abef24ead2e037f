// A Sluice partitioner: same key, same partition, as the Java client's default
// for keyed records; keyless records go to partition 0.
import { murmur2Partition } from '{{sdk_path}}/js/sluice-sdk.js';

export function partition(record, partitionCount) {
  return record.key === null ? 0 : murmur2Partition(record.key, partitionCount);
}
