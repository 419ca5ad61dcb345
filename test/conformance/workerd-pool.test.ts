/** @module The conformance suite against kvgate on workerd with the PoolState Durable Object bound (see suite.ts). */
import { conformanceSuite } from "./suite.ts";

conformanceSuite("workerd-pool");
