import type { VersionStep } from "../util/record-versions.js";

/*
 * A placement (who hosts an actor, the bucket `actors`) names the version of its shape (`v`), read
 * through the steps below (`placementOf`, placement.ts) by a worker taking actors over from a dead
 * one, which may be of another build. One without `v` is of version 1, this one's shape. Each
 * earlier version has a stored fixture in test/fixtures/placements/ that the tests take over and
 * run to the end.
 */

/** The version of a placement's shape. */
export const PLACEMENT_VERSION = 1;

/** The steps from each earlier version to the next, in order: none yet. */
export const PLACEMENT_MIGRATIONS: readonly VersionStep[] = [];
