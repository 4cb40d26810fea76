import type { VersionStep } from "../util/record-versions.js";

/*
 * An approval record (the bucket `approvals`) names the version of its shape (`v`), read through
 * the steps below (`approvalOf`, bus-approver.ts) by its host and by whoever answers it. One without
 * `v` is of version 1, this one's shape. Each earlier version has stored fixtures in
 * test/fixtures/approvals/ that the tests read, answer and decide. The signed answers in the bucket
 * `answers` carry their own version (`AnswerContent.v`).
 */

/** The version of an approval record's shape. */
export const APPROVAL_RECORD_VERSION = 1;

/** The steps from each earlier version to the next, in order: none yet. */
export const APPROVAL_MIGRATIONS: readonly VersionStep[] = [];
