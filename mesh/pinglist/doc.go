// Package pinglist computes the mesh's pinglists without a controller: a deterministic
// function of (membership, agent, epoch) that every agent evaluates alike, so that the
// lists fit together (New, Plan.Targets). It also reads members files (ParseMembers),
// and splits a change of targets into bounded batches (Steps); `gorping mesh plan`
// (package cli) prints its plans.
//
// With a budget of K targets per agent, an agent of a group of n probes its n-1
// group-mates when they leave room (n-1 < K) and gives the rest, r = min(K-n+1, hosts
// outside its group), to other groups. A group that would fill the budget (n-1 >= K,
// with other groups and K >= 2) keeps r = min(ceil((G-1)/n), K/2) inter-group slots per
// agent (what it needs to reach the G-1 other groups) and samples K-r group-mates, a
// window that moves on by its length every epoch.
//
// Guarantees, for a fixed membership (docs/mesh.md has the figures):
//   - Budget: every list has min(K, members-1) targets, each once, never the agent.
//   - Coverage: in every epoch, every ordered pair of groups (A, B) is probed by at least
//     one agent of A whenever n_A·r_A >= G-1 for every group A; that is exactly when the
//     groups' inter-group budgets allow it, since a slot probes one group. A group
//     below it (Summary.Short) probes every other group once per round of
//     ceil((G-1)/(n·r)) epochs.
//   - Rotation: from epoch 0, every pair of hosts in different groups is probed within
//     n_A·T·rounds epochs (Summary.PairEpochs), T the smallest 2^k or 3·2^(k-1) at least
//     the largest group; a sampled group's pairs within ceil((n-1)/(K-r)) epochs.
//   - Load: every agent's group-mates probe it n-1 times (exactly K-r when sampled); from
//     other groups it gets its group's incoming coverage slots spread evenly (floor or
//     ceil of the covering groups / n_B) plus fill slots in proportion to its group's
//     spare capacity (n·r less the coverage it gets), so that hosts are probed about K
//     times each whatever their group's size.
//     A small group cannot do better than (covering groups)/n_B: every other group must
//     probe it every epoch.
package pinglist
