import type { VersionStep } from "../util/record-versions.js";

/*
 * A run record, as the daemon's run index and its copies keep it, names the version of its shape
 * (`v`), read through the steps below (`migrateVersioned`) once its seal is checked on the value as
 * stored. One without `v` is of version 1, this one's shape. Each earlier version has a stored
 * fixture in test/fixtures/stored-runs/ that the tests list and follow after a daemon restart.
 */

/** The version of a stored run record's shape. */
export const RUN_RECORD_VERSION = 1;

/** The steps from each earlier version to the next, in order: none yet. */
export const RUN_RECORD_MIGRATIONS: readonly VersionStep[] = [];
