// Every in-process selection in the suite checks its kept score columns against a fill from scratch (see KeptColumns).
import { Selector } from "../../src/routing/selector.ts";

Selector.verifyKeptColumns = true;
