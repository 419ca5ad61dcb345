/** @module The conformance suite against kvgate running on node as a real process (see suite.ts). */
import { conformanceSuite } from "./suite.ts";

conformanceSuite("node");
