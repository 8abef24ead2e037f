// The component's entry point: componentize-js exports `partitionerApi` from here.
import { log } from 'sluice:plugin/host@0.1.0';
import { partitionerApi as exportPartitioner, setLog } from '../../sdk/js/sluice-sdk.js';
import { init, partition } from './json-field.js';

setLog(log);
export const partitionerApi = exportPartitioner(partition, init);
