// The component's entry point: componentize-js exports `validatorApi` from here.
import { log } from 'sluice:plugin/host@0.2.0';
import { validatorApi as exportValidator, setLog } from '../../sdk/js/sluice-sdk.js';
import { init, validate } from './json-validator.js';

setLog(log);
export const validatorApi = exportValidator(validate, init);
