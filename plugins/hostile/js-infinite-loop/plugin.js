// Hostile: never returns from `partition`, unless the key is `ok` (so the same
// plugin also proves the host recovers after stopping it). The JavaScript twin
// of plugins/hostile/infinite-loop.
import { partitionerApi as exportPartitioner } from '../../../sdk/js/sluice-sdk.js';

const OK = 'ok';

function spin(record, partitionCount) {
  let n = 0;
  while (record.key === null || new TextDecoder().decode(record.key) !== OK) n++;
  return n % partitionCount;
}

export const partitionerApi = exportPartitioner(spin);
