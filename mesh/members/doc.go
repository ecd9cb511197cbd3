// Package members is where a mesh agent learns who its peers are (names, groups and the
// address of their listener) from a source whose cost does not grow with the fleet at
// every refresh: on Kubernetes the API server the cluster already runs (a pod list and a
// watch through client-go's informer, Kubernetes), elsewhere a members file
// (FromPinglist over pinglist.ParseMembers). It also watches DNS answers for the
// truncation that makes a headless Service's list of agents silently short (DNS), and
// reads peers' descriptions conditionally (Fetcher), so that an agent reads only the
// descriptions of the peers its pinglist chooses, and a description that has not changed
// costs a 304 and no body.
package members
