/** @module The conformance suite against kvgate running on workerd as a real process (see suite.ts). */
import { conformanceSuite } from "./suite.ts";

conformanceSuite("workerd");
