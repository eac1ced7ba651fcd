// Imported first by bin.ts, before any module that could emit a process warning.
import { takeOverWarnings } from './warnings.js';

takeOverWarnings();
