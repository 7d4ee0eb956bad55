/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { DocumentTypeDecoration } from '@graphql-typed-document-node/core';
export type EventFilter = {
  actor?: string | null | undefined;
  since?: number | null | undefined;
  streamId?: string | null | undefined;
  streamPrefix?: string | null | undefined;
  types?: Array<string> | null | undefined;
  until?: number | null | undefined;
};

export type GpuModelWeightInput = {
  model: string;
  weight: number;
};

export type JobFilter = {
  jobClass?: string | null | undefined;
  /** Only the jobs you submitted (sessions you opened). */
  mine?: boolean;
  project?: string | null | undefined;
  states?: Array<string> | null | undefined;
  submittedAfter?: number | null | undefined;
  submittedBefore?: number | null | undefined;
};

export type OpenSessionInput = {
  /** The session's protected time (≤ 8 h). */
  capS?: number;
  /** The clusters it accepts (none: any). */
  clusters?: Array<string> | null | undefined;
  command: Array<string>;
  /** The GPU models the session accepts (none: any), as SubmitJobInput.gpuModels. */
  gpuModels?: Array<string> | null | undefined;
  gpus: number;
  project: string;
  sessionId?: string | null | undefined;
};

export type ShareInput = {
  child: string;
  /** Optionally, the child's debug quota in GPUs (null: back to the default that follows the share; absent: unchanged). */
  debugQuotaGpus?: number | null | undefined;
  /** Optionally, what people call the child (null: its id again; absent: unchanged). 1 to 64 characters (docs/api.md). */
  displayName?: string | null | undefined;
  /** Optionally, the cluster the child's jobs run on (ADR 0067; null: unpinned; absent: unchanged). A registered cluster's name. */
  pin?: string | null | undefined;
  share: number;
};

export type SubmitJobInput = {
  /** The clusters it accepts (none: any). */
  clusters?: Array<string> | null | undefined;
  command: Array<string>;
  /** The GPU models the job accepts (none: any), e.g. ["H100", "A100"]. */
  gpuModels?: Array<string> | null | undefined;
  gpus: number;
  jobClass?: string;
  jobId?: string | null | undefined;
  minRuntimeS: number;
  priority?: number;
  project: string;
  resumable?: boolean;
};

export type ActingJobsQueryVariables = Exact<{
  first: number;
  filter?: JobFilter | null | undefined;
}>;


export type ActingJobsQuery = { __typename: 'Query', jobs: { __typename: 'JobConnection', edges: Array<{ __typename: 'JobEdge', node: { __typename: 'Job', id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null, owner: { __typename: 'JobOwner', subject: string, name: string } | null } }> } };

export type ActingSessionsQueryVariables = Exact<{
  first: number;
  filter?: JobFilter | null | undefined;
}>;


export type ActingSessionsQuery = { __typename: 'Query', sessions: { __typename: 'JobConnection', edges: Array<{ __typename: 'JobEdge', node: { __typename: 'Job', id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null, owner: { __typename: 'JobOwner', subject: string, name: string } | null } }> } };

export type ActingProjectsQueryVariables = Exact<{ [key: string]: never; }>;


export type ActingProjectsQuery = { __typename: 'Query', projects: Array<{ __typename: 'Allocation', name: string, displayName: string, parent: string, isProject: boolean }> };

export type CancelJobMutationVariables = Exact<{
  id: string | number;
  reason: string;
}>;


export type CancelJobMutation = { __typename: 'Mutation', cancelJob:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'JobCancelled', job: { __typename: 'Job', id: string, state: string } }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type OpenSessionMutationVariables = Exact<{
  input: OpenSessionInput;
}>;


export type OpenSessionMutation = { __typename: 'Mutation', openSession:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
    | { __typename: 'SessionOpened', job: { __typename: 'Job', id: string, state: string }, outlook: { __typename: 'SubmitOutlook', funded: boolean, reason: string, fundedByLane: boolean, protectionS: number, askedProtectionS: number, project: string, allocation: string | null, inUseGpus: number, entitledGpus: number, message: string, qualification: { __typename: 'DebugQualification', qualified: boolean, reason: string, quotaGpus: number, inUseGpus: number, aheadGpus: number } | null } | null }
   };

export type RequeueJobMutationVariables = Exact<{
  job: string | number;
  reason: string;
  attempt?: number | null | undefined;
}>;


export type RequeueJobMutation = { __typename: 'Mutation', requestPreemption:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'PreemptionRequested', requestedAt: number, graceS: number, job: { __typename: 'Job', id: string, state: string } }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type ActingJobOwnerQueryVariables = Exact<{
  id: string | number;
}>;


export type ActingJobOwnerQuery = { __typename: 'Query', job: { __typename: 'Job', id: string, owner: { __typename: 'JobOwner', subject: string, name: string } | null } | null };

export type ClusterOccupancyQueryVariables = Exact<{ [key: string]: never; }>;


export type ClusterOccupancyQuery = { __typename: 'Query', clusterOccupancy: Array<{ __typename: 'ClusterOccupancy', name: string, nodes: number, gpus: number, busyGpus: number, freeGpus: number, drainingGpus: number, downGpus: number, largestWaitingGang: number | null, fragmentedGpus: number | null, gpuModels: Array<{ __typename: 'ModelOccupancy', gpuModel: string, nodes: number, gpus: number, busyGpus: number, freeGpus: number, drainingGpus: number, downGpus: number }> }> };

export type GpuModelsQueryVariables = Exact<{ [key: string]: never; }>;


export type GpuModelsQuery = { __typename: 'Query', gpuModels: Array<{ __typename: 'GpuModel', model: string, weight: number, gpus: number, nodes: number, clusters: Array<string> }> };

export type SetGpuModelWeightsMutationVariables = Exact<{
  weights: Array<GpuModelWeightInput> | GpuModelWeightInput;
  reason: string;
}>;


export type SetGpuModelWeightsMutation = { __typename: 'Mutation', setGpuModelWeights:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'PolicySet', position: number }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type OutlookFragment = { __typename: 'SubmitOutlook', funded: boolean, reason: string, fundedByLane: boolean, protectionS: number, askedProtectionS: number, project: string, allocation: string | null, inUseGpus: number, entitledGpus: number, message: string, qualification: { __typename: 'DebugQualification', qualified: boolean, reason: string, quotaGpus: number, inUseGpus: number, aheadGpus: number } | null };

export type WhatIfQueryVariables = Exact<{
  parent: string;
  shares: Array<ShareInput> | ShareInput;
}>;


export type WhatIfQuery = { __typename: 'Query', whatIf:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'WhatIfPreview', parent: string, since: number, until: number, windowS: number, jobs: number, jobsCapped: boolean, capacityGpus: number, cached: boolean, wallS: number, summary: string, allocations: Array<{ __typename: 'WhatIfAllocation', name: string, parent: string, depth: number, isProject: boolean, changed: boolean, shareBefore: number, shareAfter: number, entitlementBefore: number, entitlementAfter: number, owedBefore: number, deliveredBefore: number, ratioBefore: number | null, owedAfter: number, deliveredAfter: number, ratioAfter: number | null }>, waits: Array<{ __typename: 'WhatIfWaits', jobClass: string, jobs: number, p50BeforeS: number | null, p90BeforeS: number | null, p50AfterS: number | null, p90AfterS: number | null }> }
   };

export type OverviewQueryVariables = Exact<{
  sinceS?: number | null | undefined;
  points: number;
  utcOffsetS: number;
  periodS: number;
  pastPeriods: number;
}>;


export type OverviewQuery = { __typename: 'Query', overview: { __typename: 'Overview', position: number, since: number, until: number, stepS: number, capacityGpus: number, demandByHourOfWeek: Array<Array<number>>, occupancy: Array<{ __typename: 'OccupancyPoint', t: number, funded: number, unfunded: number, idle: number, capacity: number }>, waits: Array<{ __typename: 'ClassWait', jobClass: string, jobs: number, started: number, waiting: number, p50S: number | null, p90S: number | null, maxS: number | null }>, preemptionsPerDay: Array<{ __typename: 'DayCount', day: string, count: number }>, owedDelivered: Array<{ __typename: 'OwedPeriod', periodId: string, start: number, end: number, current: boolean, recorded: boolean, deliveredOfOwed: number | null, label: string, allocations: Array<{ __typename: 'OwedAllocation', name: string, isProject: boolean, owed: number, delivered: number, demand: number, entitled: number, ratio: number | null, overDelivered: boolean }> }> } };

export type SubmitOutlookQueryVariables = Exact<{
  input: SubmitJobInput;
}>;


export type SubmitOutlookQuery = { __typename: 'Query', submitOutlook:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'SubmitOutlook', funded: boolean, reason: string, fundedByLane: boolean, protectionS: number, askedProtectionS: number, project: string, allocation: string | null, inUseGpus: number, entitledGpus: number, message: string, qualification: { __typename: 'DebugQualification', qualified: boolean, reason: string, quotaGpus: number, inUseGpus: number, aheadGpus: number } | null }
   };

export type SubmitJobMutationVariables = Exact<{
  input: SubmitJobInput;
}>;


export type SubmitJobMutation = { __typename: 'Mutation', submitJob:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'JobAccepted', job: { __typename: 'Job', id: string, state: string }, outlook: { __typename: 'SubmitOutlook', funded: boolean, reason: string, fundedByLane: boolean, protectionS: number, askedProtectionS: number, project: string, allocation: string | null, inUseGpus: number, entitledGpus: number, message: string, qualification: { __typename: 'DebugQualification', qualified: boolean, reason: string, quotaGpus: number, inUseGpus: number, aheadGpus: number } | null } | null }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type SetDisplayNameMutationVariables = Exact<{
  allocation: string;
  name?: string | null | undefined;
  reason: string;
}>;


export type SetDisplayNameMutation = { __typename: 'Mutation', setDisplayName:
    | { __typename: 'DisplayNameChanged', allocation: string, displayName: string, position: number }
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type SetDebugQuotaMutationVariables = Exact<{
  allocation: string;
  gpus?: number | null | undefined;
  reason: string;
}>;


export type SetDebugQuotaMutation = { __typename: 'Mutation', setDebugQuota:
    | { __typename: 'DebugQuotaChanged', allocation: string, gpus: number | null, position: number }
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type BudgetQueryVariables = Exact<{
  periodS: number;
  periods: number;
  position?: number | null | undefined;
  at?: number | null | undefined;
}>;


export type BudgetQuery = { __typename: 'Query', budgetReport: { __typename: 'BudgetReport', position: number, asOf: number, pinned: boolean, head: number, periodS: number, csv: string, periods: Array<{ __typename: 'OwedPeriod', periodId: string, start: number, end: number, current: boolean, recorded: boolean, deliveredOfOwed: number | null, label: string, allocations: Array<{ __typename: 'OwedAllocation', name: string, isProject: boolean, owed: number, delivered: number, demand: number, entitled: number, ratio: number | null, overDelivered: boolean }> }> } };

export type AllocationHistoryQueryVariables = Exact<{
  under?: string | null | undefined;
  first: number;
}>;


export type AllocationHistoryQuery = { __typename: 'Query', allocationHistory: Array<{ __typename: 'AllocationChangeEntry', position: number, recordedAt: number, actor: string, reason: string, parent: string, allocation: string, shareBefore: number | null, shareAfter: number, debugQuotaBefore: number | null, debugQuotaAfter: number | null, debugQuotaSet: boolean, displayNameBefore: string | null, displayNameAfter: string | null, displayNameSet: boolean }> };

export type SetAllocationsMutationVariables = Exact<{
  parent: string;
  shares: Array<ShareInput> | ShareInput;
  reason: string;
}>;


export type SetAllocationsMutation = { __typename: 'Mutation', setAllocations:
    | { __typename: 'AllocationsChanged', parent: string, position: number }
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type RestoreSessionMutationVariables = Exact<{
  id: string | number;
}>;


export type RestoreSessionMutation = { __typename: 'Mutation', restoreSession:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'Rejected', code: string, reason: string }
    | { __typename: 'SessionRestored', job: { __typename: 'Job', id: string, state: string } }
   };

export type SetPinMutationVariables = Exact<{
  allocation: string;
  cluster?: string | null | undefined;
  reason: string;
}>;


export type SetPinMutation = { __typename: 'Mutation', setPin:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'PinChanged', allocation: string, pin: string | null, position: number }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type NotificationSettingsQueryVariables = Exact<{ [key: string]: never; }>;


export type NotificationSettingsQuery = { __typename: 'Query', notificationKinds: Array<{ __typename: 'NotificationKind', name: string, description: string }>, notificationSubscriptions: Array<{ __typename: 'NotificationSubscription', subscriber: string, allocation: string, channel: string, target: string, kinds: Array<string> }> };

export type SetNotificationsMutationVariables = Exact<{
  allocation: string;
  channel: string;
  target: string;
  kinds: Array<string> | string;
}>;


export type SetNotificationsMutation = { __typename: 'Mutation', setNotifications:
    | { __typename: 'InvalidInput', field: string | null, message: string }
    | { __typename: 'NotAuthorised', message: string }
    | { __typename: 'NotificationsChosen', position: number, subscription: { __typename: 'NotificationSubscription', subscriber: string, allocation: string, channel: string, target: string, kinds: Array<string> } }
    | { __typename: 'Rejected', code: string, reason: string }
   };

export type JobRowFragment = { __typename: 'Job', id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null };

export type EventRowFragment = { __typename: 'Event', position: number, streamId: string, version: number, type: string, payload: unknown, metadata: unknown, recordedAt: number, prevHash: string, hash: string };

export type WhyFragment = { __typename: 'Explanation', jobId: string, reason: string, text: string, source: string, blockingGpus: number, blockingScope: string, blockingUntil: number | null, position: number | null, positionInProject: number | null, positionInClusters: number | null, eventPosition: number | null, evidence: unknown };

export type AllocationRowFragment = { __typename: 'Allocation', name: string, displayName: string, parent: string, depth: number, share: number, entitlement: number, isProject: boolean, usageInWindow: number, entitledInWindow: number, owed: number, delivered: number, deliveredOverOwed: number | null, window: string, windowEnd: number, burn: number | null, pin: string | null, pinnedTo: string | null, debugQuotaGpus: { __typename: 'DebugQuota', gpus: number, setGpus: number | null, isDefault: boolean, setOn: string | null } | null, split: Array<{ __typename: 'AllocationSplit', cluster: string, gpuModel: string, owed: number, delivered: number, demand: number }> };

export type MeQueryVariables = Exact<{ [key: string]: never; }>;


export type MeQuery = { __typename: 'Query', me: { __typename: 'Me', subject: string, name: string, role: string, scopes: Array<string>, tokenId: string | null, via: string, capabilities: Array<string> } };

export type HealthQueryVariables = Exact<{ [key: string]: never; }>;


export type HealthQuery = { __typename: 'Query', health: string };

export type JobsQueryVariables = Exact<{
  first: number;
  filter?: JobFilter | null | undefined;
}>;


export type JobsQuery = { __typename: 'Query', jobs: { __typename: 'JobConnection', edges: Array<{ __typename: 'JobEdge', node: { __typename: 'Job', id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null } }> } };

export type JobDetailQueryVariables = Exact<{
  id: string | number;
}>;


export type JobDetailQuery = { __typename: 'Query', job: { __typename: 'Job', gpuModels: Array<string>, clusters: Array<string>, runsOn: string | null, id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null, events: Array<{ __typename: 'Event', position: number, streamId: string, version: number, type: string, payload: unknown, metadata: unknown, recordedAt: number, prevHash: string, hash: string }>, decisions: Array<{ __typename: 'Decision', position: number, type: string, recordedAt: number, actor: string | null, evidence: unknown }> } | null };

export type RecentJobEventsQueryVariables = Exact<{
  first: number;
}>;


export type RecentJobEventsQuery = { __typename: 'Query', jobs: { __typename: 'JobConnection', edges: Array<{ __typename: 'JobEdge', node: { __typename: 'Job', id: string, events: Array<{ __typename: 'Event', position: number, streamId: string, version: number, type: string, payload: unknown, metadata: unknown, recordedAt: number, prevHash: string, hash: string }> } }> } };

export type AllocationsQueryVariables = Exact<{ [key: string]: never; }>;


export type AllocationsQuery = { __typename: 'Query', allocations: Array<{ __typename: 'Allocation', name: string, displayName: string, parent: string, depth: number, share: number, entitlement: number, isProject: boolean, usageInWindow: number, entitledInWindow: number, owed: number, delivered: number, deliveredOverOwed: number | null, window: string, windowEnd: number, burn: number | null, pin: string | null, pinnedTo: string | null, debugQuotaGpus: { __typename: 'DebugQuota', gpus: number, setGpus: number | null, isDefault: boolean, setOn: string | null } | null, split: Array<{ __typename: 'AllocationSplit', cluster: string, gpuModel: string, owed: number, delivered: number, demand: number }> }> };

export type AllocationNamesQueryVariables = Exact<{ [key: string]: never; }>;


export type AllocationNamesQuery = { __typename: 'Query', allocations: Array<{ __typename: 'Allocation', name: string, displayName: string }> };

export type NodesQueryVariables = Exact<{ [key: string]: never; }>;


export type NodesQuery = { __typename: 'Query', nodes: Array<{ __typename: 'Node', id: string, gpus: number, gpuModel: string, path: Array<string>, executor: string, state: string, usedGpus: number, freeGpus: number, foreignGpus: number, jobs: Array<string>, otherJobs: number, cluster: string }> };

export type QueueQueryVariables = Exact<{
  first: number;
  cluster?: string | null | undefined;
}>;


export type QueueQuery = { __typename: 'Query', queue: { __typename: 'Queue', waiting: number, waitingGpus: number, entries: Array<{ __typename: 'QueueEntry', position: number, mine: boolean, positionInProject: number | null, positionInClusters: number | null, positionInCluster: number | null, reason: string | null, text: string | null, blockingGpus: number | null, blockingScope: string | null, blockingUntil: number | null, source: string | null, job: { __typename: 'Job', id: string, project: string, state: string, gpus: number, minRuntimeS: number, resumable: boolean, jobClass: string, priority: number, command: Array<string>, submittedAt: number, attempt: number, assignments: unknown, funded: boolean, startedAt: number | null, endedAt: number | null, exitCode: number | null, position: number, protectedUntil: number | null, sessionCapAt: number | null, sessionWarningsAt: Array<number> | null, projectName: string, sessionAddress: string | null } | null }> } };

export type WhyPendingQueryVariables = Exact<{
  job: string | number;
}>;


export type WhyPendingQuery = { __typename: 'Query', whyPending: { __typename: 'Explanation', jobId: string, reason: string, text: string, source: string, blockingGpus: number, blockingScope: string, blockingUntil: number | null, position: number | null, positionInProject: number | null, positionInClusters: number | null, eventPosition: number | null, evidence: unknown } | null };

export type WhyPreemptedQueryVariables = Exact<{
  job: string | number;
}>;


export type WhyPreemptedQuery = { __typename: 'Query', whyPreempted: { __typename: 'Explanation', jobId: string, reason: string, text: string, source: string, blockingGpus: number, blockingScope: string, blockingUntil: number | null, position: number | null, positionInProject: number | null, positionInClusters: number | null, eventPosition: number | null, evidence: unknown } | null };

export type AuditEventsQueryVariables = Exact<{
  first: number;
  after?: string | null | undefined;
  filter?: EventFilter | null | undefined;
}>;


export type AuditEventsQuery = { __typename: 'Query', auditEvents: { __typename: 'EventConnection', edges: Array<{ __typename: 'EventEdge', node: { __typename: 'Event', position: number, streamId: string, version: number, type: string, payload: unknown, metadata: unknown, recordedAt: number, prevHash: string, hash: string } }>, pageInfo: { __typename: 'PageInfo', hasNextPage: boolean, endCursor: string | null } } };

export type VerifyQueryVariables = Exact<{
  fromPosition: number;
  toPosition?: number | null | undefined;
}>;


export type VerifyQuery = { __typename: 'Query', verify: { __typename: 'Verification', fromPosition: number, toPosition: number, checked: number, ok: boolean, firstBadPosition: number | null, problem: string | null, truncated: boolean, askedToPosition: number | null, head: number | null } };

export type StateAtPinQueryVariables = Exact<{
  position?: number | null | undefined;
  time?: number | null | undefined;
  jobsFirst: number;
}>;


export type StateAtPinQuery = { __typename: 'Query', stateAt: { __typename: 'StateAt', position: number, recordedAt: number | null, jobsTruncated: boolean, allocations: Array<{ __typename: 'AllocationAt', name: string, parent: string, share: number }>, jobCounts: Array<{ __typename: 'StateCount', state: string, count: number }>, jobs: Array<{ __typename: 'JobAt', id: string, project: string, state: string, gpus: number }> } };

export type LiveEventsSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type LiveEventsSubscription = { __typename: 'Subscription', events: { __typename: 'Event', position: number, type: string, streamId: string, recordedAt: number } };

export type LiveOccupancySubscriptionVariables = Exact<{ [key: string]: never; }>;


export type LiveOccupancySubscription = { __typename: 'Subscription', occupancy: { __typename: 'Occupancy', position: number, usedGpus: number } };

export class TypedDocumentString<TResult, TVariables>
  extends String
  implements DocumentTypeDecoration<TResult, TVariables>
{
  __apiType?: NonNullable<DocumentTypeDecoration<TResult, TVariables>['__apiType']>;
  private value: string;
  public __meta__?: Record<string, any> | undefined;

  constructor(value: string, __meta__?: Record<string, any> | undefined) {
    super(value);
    this.value = value;
    this.__meta__ = __meta__;
  }

  override toString(): string & DocumentTypeDecoration<TResult, TVariables> {
    return this.value;
  }
}
export const OutlookFragmentDoc = new TypedDocumentString(`
    fragment Outlook on SubmitOutlook {
  funded
  reason
  fundedByLane
  protectionS
  askedProtectionS
  project
  allocation
  inUseGpus
  entitledGpus
  message
  qualification {
    qualified
    reason
    quotaGpus
    inUseGpus
    aheadGpus
  }
}
    `, {"fragmentName":"Outlook"}) as unknown as TypedDocumentString<OutlookFragment, unknown>;
export const JobRowFragmentDoc = new TypedDocumentString(`
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}
    `, {"fragmentName":"JobRow"}) as unknown as TypedDocumentString<JobRowFragment, unknown>;
export const EventRowFragmentDoc = new TypedDocumentString(`
    fragment EventRow on Event {
  position
  streamId
  version
  type
  payload
  metadata
  recordedAt
  prevHash
  hash
}
    `, {"fragmentName":"EventRow"}) as unknown as TypedDocumentString<EventRowFragment, unknown>;
export const WhyFragmentDoc = new TypedDocumentString(`
    fragment Why on Explanation {
  jobId
  reason
  text
  source
  blockingGpus
  blockingScope
  blockingUntil
  position
  positionInProject
  positionInClusters
  eventPosition
  evidence
}
    `, {"fragmentName":"Why"}) as unknown as TypedDocumentString<WhyFragment, unknown>;
export const AllocationRowFragmentDoc = new TypedDocumentString(`
    fragment AllocationRow on Allocation {
  name
  displayName
  parent
  depth
  share
  entitlement
  isProject
  usageInWindow
  entitledInWindow
  owed
  delivered
  deliveredOverOwed
  window
  windowEnd
  burn
  debugQuotaGpus {
    gpus
    setGpus
    isDefault
    setOn
  }
  split {
    cluster
    gpuModel
    owed
    delivered
    demand
  }
  pin
  pinnedTo
}
    `, {"fragmentName":"AllocationRow"}) as unknown as TypedDocumentString<AllocationRowFragment, unknown>;
export const ActingJobsDocument = new TypedDocumentString(`
    query ActingJobs($first: Int!, $filter: JobFilter) {
  jobs(first: $first, filter: $filter) {
    edges {
      node {
        ...JobRow
        owner {
          subject
          name
        }
      }
    }
  }
}
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}`) as unknown as TypedDocumentString<ActingJobsQuery, ActingJobsQueryVariables>;
export const ActingSessionsDocument = new TypedDocumentString(`
    query ActingSessions($first: Int!, $filter: JobFilter) {
  sessions(first: $first, filter: $filter) {
    edges {
      node {
        ...JobRow
        owner {
          subject
          name
        }
      }
    }
  }
}
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}`) as unknown as TypedDocumentString<ActingSessionsQuery, ActingSessionsQueryVariables>;
export const ActingProjectsDocument = new TypedDocumentString(`
    query ActingProjects {
  projects {
    name
    displayName
    parent
    isProject
  }
}
    `) as unknown as TypedDocumentString<ActingProjectsQuery, ActingProjectsQueryVariables>;
export const CancelJobDocument = new TypedDocumentString(`
    mutation CancelJob($id: ID!, $reason: String!) {
  cancelJob(id: $id, reason: $reason) {
    __typename
    ... on JobCancelled {
      job {
        id
        state
      }
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<CancelJobMutation, CancelJobMutationVariables>;
export const OpenSessionDocument = new TypedDocumentString(`
    mutation OpenSession($input: OpenSessionInput!) {
  openSession(input: $input) {
    __typename
    ... on SessionOpened {
      job {
        id
        state
      }
      outlook {
        ...Outlook
      }
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    fragment Outlook on SubmitOutlook {
  funded
  reason
  fundedByLane
  protectionS
  askedProtectionS
  project
  allocation
  inUseGpus
  entitledGpus
  message
  qualification {
    qualified
    reason
    quotaGpus
    inUseGpus
    aheadGpus
  }
}`) as unknown as TypedDocumentString<OpenSessionMutation, OpenSessionMutationVariables>;
export const RequeueJobDocument = new TypedDocumentString(`
    mutation RequeueJob($job: ID!, $reason: String!, $attempt: BigInt) {
  requestPreemption(job: $job, reason: $reason, requeue: true, attempt: $attempt) {
    __typename
    ... on PreemptionRequested {
      job {
        id
        state
      }
      requestedAt
      graceS
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<RequeueJobMutation, RequeueJobMutationVariables>;
export const ActingJobOwnerDocument = new TypedDocumentString(`
    query ActingJobOwner($id: ID!) {
  job(id: $id) {
    id
    owner {
      subject
      name
    }
  }
}
    `) as unknown as TypedDocumentString<ActingJobOwnerQuery, ActingJobOwnerQueryVariables>;
export const ClusterOccupancyDocument = new TypedDocumentString(`
    query ClusterOccupancy {
  clusterOccupancy {
    name
    nodes
    gpus
    busyGpus
    freeGpus
    drainingGpus
    downGpus
    largestWaitingGang
    fragmentedGpus
    gpuModels {
      gpuModel
      nodes
      gpus
      busyGpus
      freeGpus
      drainingGpus
      downGpus
    }
  }
}
    `) as unknown as TypedDocumentString<ClusterOccupancyQuery, ClusterOccupancyQueryVariables>;
export const GpuModelsDocument = new TypedDocumentString(`
    query GpuModels {
  gpuModels {
    model
    weight
    gpus
    nodes
    clusters
  }
}
    `) as unknown as TypedDocumentString<GpuModelsQuery, GpuModelsQueryVariables>;
export const SetGpuModelWeightsDocument = new TypedDocumentString(`
    mutation SetGpuModelWeights($weights: [GpuModelWeightInput!]!, $reason: String!) {
  setGpuModelWeights(weights: $weights, reason: $reason) {
    __typename
    ... on PolicySet {
      position
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetGpuModelWeightsMutation, SetGpuModelWeightsMutationVariables>;
export const WhatIfDocument = new TypedDocumentString(`
    query WhatIf($parent: String!, $shares: [ShareInput!]!) {
  whatIf(parent: $parent, shares: $shares) {
    __typename
    ... on WhatIfPreview {
      parent
      since
      until
      windowS
      jobs
      jobsCapped
      capacityGpus
      cached
      wallS
      summary
      allocations {
        name
        parent
        depth
        isProject
        changed
        shareBefore
        shareAfter
        entitlementBefore
        entitlementAfter
        owedBefore
        deliveredBefore
        ratioBefore
        owedAfter
        deliveredAfter
        ratioAfter
      }
      waits {
        jobClass
        jobs
        p50BeforeS
        p90BeforeS
        p50AfterS
        p90AfterS
      }
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<WhatIfQuery, WhatIfQueryVariables>;
export const OverviewDocument = new TypedDocumentString(`
    query Overview($sinceS: Float, $points: Int!, $utcOffsetS: Int!, $periodS: Float!, $pastPeriods: Int!) {
  overview(
    sinceS: $sinceS
    points: $points
    utcOffsetS: $utcOffsetS
    periodS: $periodS
    pastPeriods: $pastPeriods
  ) {
    position
    since
    until
    stepS
    capacityGpus
    occupancy {
      t
      funded
      unfunded
      idle
      capacity
    }
    demandByHourOfWeek
    waits {
      jobClass
      jobs
      started
      waiting
      p50S
      p90S
      maxS
    }
    preemptionsPerDay {
      day
      count
    }
    owedDelivered {
      periodId
      start
      end
      current
      recorded
      deliveredOfOwed
      label
      allocations {
        name
        isProject
        owed
        delivered
        demand
        entitled
        ratio
        overDelivered
      }
    }
  }
}
    `) as unknown as TypedDocumentString<OverviewQuery, OverviewQueryVariables>;
export const SubmitOutlookDocument = new TypedDocumentString(`
    query SubmitOutlook($input: SubmitJobInput!) {
  submitOutlook(input: $input) {
    __typename
    ... on SubmitOutlook {
      ...Outlook
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    fragment Outlook on SubmitOutlook {
  funded
  reason
  fundedByLane
  protectionS
  askedProtectionS
  project
  allocation
  inUseGpus
  entitledGpus
  message
  qualification {
    qualified
    reason
    quotaGpus
    inUseGpus
    aheadGpus
  }
}`) as unknown as TypedDocumentString<SubmitOutlookQuery, SubmitOutlookQueryVariables>;
export const SubmitJobDocument = new TypedDocumentString(`
    mutation SubmitJob($input: SubmitJobInput!) {
  submitJob(input: $input) {
    __typename
    ... on JobAccepted {
      job {
        id
        state
      }
      outlook {
        ...Outlook
      }
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    fragment Outlook on SubmitOutlook {
  funded
  reason
  fundedByLane
  protectionS
  askedProtectionS
  project
  allocation
  inUseGpus
  entitledGpus
  message
  qualification {
    qualified
    reason
    quotaGpus
    inUseGpus
    aheadGpus
  }
}`) as unknown as TypedDocumentString<SubmitJobMutation, SubmitJobMutationVariables>;
export const SetDisplayNameDocument = new TypedDocumentString(`
    mutation SetDisplayName($allocation: String!, $name: String, $reason: String!) {
  setDisplayName(allocation: $allocation, name: $name, reason: $reason) {
    __typename
    ... on DisplayNameChanged {
      allocation
      displayName
      position
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetDisplayNameMutation, SetDisplayNameMutationVariables>;
export const SetDebugQuotaDocument = new TypedDocumentString(`
    mutation SetDebugQuota($allocation: String!, $gpus: Int, $reason: String!) {
  setDebugQuota(allocation: $allocation, gpus: $gpus, reason: $reason) {
    __typename
    ... on DebugQuotaChanged {
      allocation
      gpus
      position
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetDebugQuotaMutation, SetDebugQuotaMutationVariables>;
export const BudgetDocument = new TypedDocumentString(`
    query Budget($periodS: Float!, $periods: Int!, $position: BigInt, $at: Float) {
  budgetReport(periodS: $periodS, periods: $periods, position: $position, at: $at) {
    position
    asOf
    pinned
    head
    periodS
    csv
    periods {
      periodId
      start
      end
      current
      recorded
      deliveredOfOwed
      label
      allocations {
        name
        isProject
        owed
        delivered
        demand
        entitled
        ratio
        overDelivered
      }
    }
  }
}
    `) as unknown as TypedDocumentString<BudgetQuery, BudgetQueryVariables>;
export const AllocationHistoryDocument = new TypedDocumentString(`
    query AllocationHistory($under: String, $first: Int!) {
  allocationHistory(under: $under, first: $first) {
    position
    recordedAt
    actor
    reason
    parent
    allocation
    shareBefore
    shareAfter
    debugQuotaBefore
    debugQuotaAfter
    debugQuotaSet
    displayNameBefore
    displayNameAfter
    displayNameSet
  }
}
    `) as unknown as TypedDocumentString<AllocationHistoryQuery, AllocationHistoryQueryVariables>;
export const SetAllocationsDocument = new TypedDocumentString(`
    mutation SetAllocations($parent: String!, $shares: [ShareInput!]!, $reason: String!) {
  setAllocations(parent: $parent, shares: $shares, reason: $reason) {
    __typename
    ... on AllocationsChanged {
      parent
      position
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetAllocationsMutation, SetAllocationsMutationVariables>;
export const RestoreSessionDocument = new TypedDocumentString(`
    mutation RestoreSession($id: ID!) {
  restoreSession(id: $id) {
    __typename
    ... on SessionRestored {
      job {
        id
        state
      }
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<RestoreSessionMutation, RestoreSessionMutationVariables>;
export const SetPinDocument = new TypedDocumentString(`
    mutation SetPin($allocation: String!, $cluster: String, $reason: String!) {
  setPin(allocation: $allocation, cluster: $cluster, reason: $reason) {
    __typename
    ... on PinChanged {
      allocation
      pin
      position
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetPinMutation, SetPinMutationVariables>;
export const NotificationSettingsDocument = new TypedDocumentString(`
    query NotificationSettings {
  notificationKinds {
    name
    description
  }
  notificationSubscriptions {
    subscriber
    allocation
    channel
    target
    kinds
  }
}
    `) as unknown as TypedDocumentString<NotificationSettingsQuery, NotificationSettingsQueryVariables>;
export const SetNotificationsDocument = new TypedDocumentString(`
    mutation SetNotifications($allocation: String!, $channel: String!, $target: String!, $kinds: [String!]!) {
  setNotifications(
    allocation: $allocation
    channel: $channel
    target: $target
    kinds: $kinds
  ) {
    __typename
    ... on NotificationsChosen {
      position
      subscription {
        subscriber
        allocation
        channel
        target
        kinds
      }
    }
    ... on Rejected {
      code
      reason
    }
    ... on InvalidInput {
      field
      message
    }
    ... on NotAuthorised {
      message
    }
  }
}
    `) as unknown as TypedDocumentString<SetNotificationsMutation, SetNotificationsMutationVariables>;
export const MeDocument = new TypedDocumentString(`
    query Me {
  me {
    subject
    name
    role
    scopes
    tokenId
    via
    capabilities
  }
}
    `) as unknown as TypedDocumentString<MeQuery, MeQueryVariables>;
export const HealthDocument = new TypedDocumentString(`
    query Health {
  health
}
    `) as unknown as TypedDocumentString<HealthQuery, HealthQueryVariables>;
export const JobsDocument = new TypedDocumentString(`
    query Jobs($first: Int!, $filter: JobFilter) {
  jobs(first: $first, filter: $filter) {
    edges {
      node {
        ...JobRow
      }
    }
  }
}
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}`) as unknown as TypedDocumentString<JobsQuery, JobsQueryVariables>;
export const JobDetailDocument = new TypedDocumentString(`
    query JobDetail($id: ID!) {
  job(id: $id) {
    ...JobRow
    gpuModels
    clusters
    runsOn
    events {
      ...EventRow
    }
    decisions {
      position
      type
      recordedAt
      actor
      evidence
    }
  }
}
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}
fragment EventRow on Event {
  position
  streamId
  version
  type
  payload
  metadata
  recordedAt
  prevHash
  hash
}`) as unknown as TypedDocumentString<JobDetailQuery, JobDetailQueryVariables>;
export const RecentJobEventsDocument = new TypedDocumentString(`
    query RecentJobEvents($first: Int!) {
  jobs(first: $first) {
    edges {
      node {
        id
        events {
          ...EventRow
        }
      }
    }
  }
}
    fragment EventRow on Event {
  position
  streamId
  version
  type
  payload
  metadata
  recordedAt
  prevHash
  hash
}`) as unknown as TypedDocumentString<RecentJobEventsQuery, RecentJobEventsQueryVariables>;
export const AllocationsDocument = new TypedDocumentString(`
    query Allocations {
  allocations {
    ...AllocationRow
  }
}
    fragment AllocationRow on Allocation {
  name
  displayName
  parent
  depth
  share
  entitlement
  isProject
  usageInWindow
  entitledInWindow
  owed
  delivered
  deliveredOverOwed
  window
  windowEnd
  burn
  debugQuotaGpus {
    gpus
    setGpus
    isDefault
    setOn
  }
  split {
    cluster
    gpuModel
    owed
    delivered
    demand
  }
  pin
  pinnedTo
}`) as unknown as TypedDocumentString<AllocationsQuery, AllocationsQueryVariables>;
export const AllocationNamesDocument = new TypedDocumentString(`
    query AllocationNames {
  allocations {
    name
    displayName
  }
}
    `) as unknown as TypedDocumentString<AllocationNamesQuery, AllocationNamesQueryVariables>;
export const NodesDocument = new TypedDocumentString(`
    query Nodes {
  nodes {
    id
    gpus
    gpuModel
    path
    executor
    state
    usedGpus
    freeGpus
    foreignGpus
    jobs
    otherJobs
    cluster
  }
}
    `) as unknown as TypedDocumentString<NodesQuery, NodesQueryVariables>;
export const QueueDocument = new TypedDocumentString(`
    query Queue($first: Int!, $cluster: String) {
  queue(first: $first, cluster: $cluster) {
    waiting
    waitingGpus
    entries {
      position
      mine
      positionInProject
      positionInClusters
      positionInCluster
      reason
      text
      blockingGpus
      blockingScope
      blockingUntil
      source
      job {
        ...JobRow
      }
    }
  }
}
    fragment JobRow on Job {
  id
  project
  state
  gpus
  minRuntimeS
  resumable
  jobClass
  priority
  command
  submittedAt
  attempt
  assignments
  funded
  startedAt
  endedAt
  exitCode
  position
  protectedUntil
  sessionCapAt
  sessionWarningsAt
  projectName
  sessionAddress
}`) as unknown as TypedDocumentString<QueueQuery, QueueQueryVariables>;
export const WhyPendingDocument = new TypedDocumentString(`
    query WhyPending($job: ID!) {
  whyPending(job: $job) {
    ...Why
  }
}
    fragment Why on Explanation {
  jobId
  reason
  text
  source
  blockingGpus
  blockingScope
  blockingUntil
  position
  positionInProject
  positionInClusters
  eventPosition
  evidence
}`) as unknown as TypedDocumentString<WhyPendingQuery, WhyPendingQueryVariables>;
export const WhyPreemptedDocument = new TypedDocumentString(`
    query WhyPreempted($job: ID!) {
  whyPreempted(job: $job) {
    ...Why
  }
}
    fragment Why on Explanation {
  jobId
  reason
  text
  source
  blockingGpus
  blockingScope
  blockingUntil
  position
  positionInProject
  positionInClusters
  eventPosition
  evidence
}`) as unknown as TypedDocumentString<WhyPreemptedQuery, WhyPreemptedQueryVariables>;
export const AuditEventsDocument = new TypedDocumentString(`
    query AuditEvents($first: Int!, $after: String, $filter: EventFilter) {
  auditEvents(first: $first, after: $after, filter: $filter) {
    edges {
      node {
        ...EventRow
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}
    fragment EventRow on Event {
  position
  streamId
  version
  type
  payload
  metadata
  recordedAt
  prevHash
  hash
}`) as unknown as TypedDocumentString<AuditEventsQuery, AuditEventsQueryVariables>;
export const VerifyDocument = new TypedDocumentString(`
    query Verify($fromPosition: BigInt!, $toPosition: BigInt) {
  verify(fromPosition: $fromPosition, toPosition: $toPosition) {
    fromPosition
    toPosition
    checked
    ok
    firstBadPosition
    problem
    truncated
    askedToPosition
    head
  }
}
    `) as unknown as TypedDocumentString<VerifyQuery, VerifyQueryVariables>;
export const StateAtPinDocument = new TypedDocumentString(`
    query StateAtPin($position: BigInt, $time: Float, $jobsFirst: Int!) {
  stateAt(position: $position, time: $time, jobsFirst: $jobsFirst) {
    position
    recordedAt
    allocations {
      name
      parent
      share
    }
    jobCounts {
      state
      count
    }
    jobs {
      id
      project
      state
      gpus
    }
    jobsTruncated
  }
}
    `) as unknown as TypedDocumentString<StateAtPinQuery, StateAtPinQueryVariables>;
export const LiveEventsDocument = new TypedDocumentString(`
    subscription LiveEvents {
  events {
    position
    type
    streamId
    recordedAt
  }
}
    `) as unknown as TypedDocumentString<LiveEventsSubscription, LiveEventsSubscriptionVariables>;
export const LiveOccupancyDocument = new TypedDocumentString(`
    subscription LiveOccupancy {
  occupancy {
    position
    usedGpus
  }
}
    `) as unknown as TypedDocumentString<LiveOccupancySubscription, LiveOccupancySubscriptionVariables>;