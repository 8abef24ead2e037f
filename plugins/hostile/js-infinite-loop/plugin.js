// Hostile: never returns from `partition`, unless the key is `ok` (so the same
// plugin also proves the host recovers after stopping it). The JavaScript twin
// of plugins/hostile/infinite-loop.
import { partitionerApi as exportPartitioner } from '../../../sdk/js/sluice-sdk.js';

const OK = 'ok';

function spin(record, partitionCount) {
  const key = record.key === null ? null : new TextDecoder().decode(record.key);
  // Said on stderr first: the host puts a guest's stdio in the plugin's log, even for a
  // call it stops.
  if (key !== OK) console.error('spinning on a key that is not ok');
  let n = 0;
  while (key !== OK) n++;
  return n % partitionCount;
}

export const partitionerApi = exportPartitioner(spin);
