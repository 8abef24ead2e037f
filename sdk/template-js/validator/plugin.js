// The component's entry point: componentize-js exports `validatorApi` from here.
import { log } from 'sluice:plugin/host@0.2.0';
import { validatorApi as exportValidator, setLog } from '{{sdk_path}}/js/sluice-sdk.js';
import { validate } from './{{name}}.js';

setLog(log); // sluice-sdk.js's log() writes to the broker's log for this plugin
export const validatorApi = exportValidator(validate);
