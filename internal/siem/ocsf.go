// Package siem carries the audit log into a security team's SIEM: each
// record as an OCSF event (API Activity for requests and what workflows
// do, Authentication for token grants), read by the export endpoint or
// pushed to syslog and HTTPS sinks, each sink with a durable cursor per
// tenant chain so delivery is at least once, in order, and resumes after a
// restart.
package siem

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/audit"
)

// OCSF schema versions the export writes: OCSFVersion by default, the
// chain in the record_integrity profile's attestation and the agent in the
// ai_operation profile's ai_agent; OCSFVersion14 for SIEMs pinned to it,
// the chain under unmapped.
const (
	OCSFVersion   = "1.9.0"
	OCSFVersion14 = "1.4.0"
)

// OCSFVersions lists the versions the export writes.
var OCSFVersions = []string{OCSFVersion, OCSFVersion14}

// ChainPrefix begins the chain_uid of a tenant's audit chain in the
// attestation of its events: agentplane:audit:<tenant>.
const ChainPrefix = "agentplane:audit:"

// Format names accepted by the export.
const FormatOCSF = "ocsf"

// Formats lists the export formats.
var Formats = []string{FormatOCSF}

// OCSF classes and categories the export uses.
const (
	ClassAPIActivity      = 6003
	CategoryApplication   = 6
	ClassAuthentication   = 3002
	CategoryIAM           = 3
	activityOther         = 99
	authActivityLogon     = 1
	authProtocolOAuth2    = 6
	statusSuccess         = 1
	statusFailure         = 2
	severityInformational = 1
	severityLow           = 2
	severityMedium        = 3
)

// Product is the metadata.product of every event.
type Product struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version,omitempty"`
}

// Event is one audit record as an OCSF event: the attributes both classes
// share, and those of API Activity or Authentication.
type Event struct {
	ActivityID     int           `json:"activity_id"`
	ActivityName   string        `json:"activity_name"`
	CategoryUID    int           `json:"category_uid"`
	CategoryName   string        `json:"category_name"`
	ClassUID       int           `json:"class_uid"`
	ClassName      string        `json:"class_name"`
	TypeUID        int64         `json:"type_uid"`
	TypeName       string        `json:"type_name"`
	Time           int64         `json:"time"`
	TimezoneOffset int           `json:"timezone_offset"`
	SeverityID     int           `json:"severity_id"`
	Severity       string        `json:"severity"`
	StatusID       int           `json:"status_id"`
	Status         string        `json:"status"`
	StatusCode     string        `json:"status_code,omitempty"`
	StatusDetail   string        `json:"status_detail,omitempty"`
	Message        string        `json:"message"`
	Metadata       Metadata      `json:"metadata"`
	Actor          *Actor        `json:"actor,omitempty"`
	API            *API          `json:"api,omitempty"`
	Resources      []Resource    `json:"resources,omitempty"`
	SrcEndpoint    *Endpoint     `json:"src_endpoint,omitempty"`
	HTTPRequest    *HTTPRequest  `json:"http_request,omitempty"`
	HTTPResponse   *HTTPResponse `json:"http_response,omitempty"`
	User           *User         `json:"user,omitempty"`
	Service        *Service      `json:"service,omitempty"`
	AuthProtocolID int           `json:"auth_protocol_id,omitempty"`
	AuthProtocol   string        `json:"auth_protocol,omitempty"`
	RawData        string        `json:"raw_data"`
	Unmapped       Unmapped      `json:"unmapped"`
	// AttestationList (1.9, record_integrity) places the record in its
	// tenant's hash chain.
	AttestationList []Attestation `json:"attestation_list,omitempty"`
	// AIAgent (1.9, ai_operation) is the agent a workflow's record acts
	// for, the invoker being the actor.
	AIAgent *AIAgent `json:"ai_agent,omitempty"`
}

// Attestation is a record's place in its chain (OCSF 1.9 record_integrity):
// its hash as the fingerprint, the previous record and its hash, the
// tenant's chain. The fingerprint is the audit record's own hash
// (SHA-256 of the previous hash and the RFC 8785 form of the record without
// its hash, docs/audit.md), the record being raw_data.
type Attestation struct {
	UID          string      `json:"uid"`
	AuthorityUID string      `json:"authority_uid"`
	ChainUID     string      `json:"chain_uid"`
	Fingerprint  Fingerprint `json:"fingerprint"`
	PrevEvent    *PrevEvent  `json:"prev_event,omitempty"`
}

// Fingerprint is a SHA-256 hash, hex.
type Fingerprint struct {
	AlgorithmID int    `json:"algorithm_id"`
	Algorithm   string `json:"algorithm"`
	Value       string `json:"value"`
}

// PrevEvent is the previous record of the chain: its id (the previous
// event's metadata.uid) and hash.
type PrevEvent struct {
	UID         string      `json:"uid"`
	Fingerprint Fingerprint `json:"fingerprint"`
}

// AIAgent is an agent: its name, version and the workflow as the instance.
type AIAgent struct {
	UID         string `json:"uid"`
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	InstanceUID string `json:"instance_uid,omitempty"`
}

func sha256Fingerprint(hash string) Fingerprint {
	return Fingerprint{AlgorithmID: 3, Algorithm: "SHA-256", Value: hash}
}

// Metadata is the event's metadata: uid is the audit record's id, sequence
// its seq in the tenant's chain.
type Metadata struct {
	UID            string   `json:"uid"`
	Version        string   `json:"version"`
	Profiles       []string `json:"profiles,omitempty"`
	Product        Product  `json:"product"`
	TenantUID      string   `json:"tenant_uid"`
	Sequence       int64    `json:"sequence"`
	CorrelationUID string   `json:"correlation_uid,omitempty"`
	LogName        string   `json:"log_name"`
}

// Actor is who acted: the token's subject as the user, its OAuth client as
// the app.
type Actor struct {
	User   *User  `json:"user,omitempty"`
	AppUID string `json:"app_uid,omitempty"`
}

// User names a subject or a client.
type User struct {
	UID  string `json:"uid,omitempty"`
	Name string `json:"name,omitempty"`
}

// API is the operation: the audit action and the request id.
type API struct {
	Operation string   `json:"operation"`
	Request   *Request `json:"request,omitempty"`
	Service   *Service `json:"service,omitempty"`
}

// Request names one API request.
type Request struct {
	UID string `json:"uid"`
}

// Service is agentplane itself.
type Service struct {
	Name string `json:"name"`
}

// Resource is what was acted on.
type Resource struct {
	Type string `json:"type,omitempty"`
	UID  string `json:"uid,omitempty"`
	Name string `json:"name,omitempty"`
}

// Endpoint is the source of the activity.
type Endpoint struct {
	Name    string `json:"name,omitempty"`
	SvcName string `json:"svc_name,omitempty"`
}

// HTTPRequest is the request's method and path.
type HTTPRequest struct {
	HTTPMethod string `json:"http_method,omitempty"`
	URL        *URL   `json:"url,omitempty"`
}

// URL is a request path.
type URL struct {
	Path string `json:"path"`
}

// HTTPResponse is the answer's status.
type HTTPResponse struct {
	Code int `json:"code"`
}

// Unmapped holds what OCSF has no attribute for: the record's outcome,
// workflow and details, and in 1.4.0 its place in its hash chain (1.4.0
// has no integrity fields for a log chain).
type Unmapped struct {
	Seq        int64  `json:"seq,omitempty"`
	Hash       string `json:"hash,omitempty"`
	PrevHash   string `json:"prev_hash,omitempty"`
	Outcome    string `json:"outcome"`
	WorkflowID string `json:"workflow_id,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	// Details are the record's details (never a secret or a body): a
	// workflow step's action and status, a tool call's operation.
	Details json.RawMessage `json:"details,omitempty"`
}

// Mapper turns audit records into OCSF events for one product version.
type Mapper struct {
	// Version is agentplane's version, in metadata.product.version.
	Version string
	// OCSF is the schema version written, one of OCSFVersions (""
	// is OCSFVersion).
	OCSF string
}

func (m Mapper) ocsf() string { return cmp.Or(m.OCSF, OCSFVersion) }

// Event maps one record: oauth.token to Authentication (a client
// authenticating for an access token, activity Logon), everything else to
// API Activity, its activity from the HTTP method (POST create, GET read,
// PUT or PATCH update, DELETE delete) or, for what a workflow does, from
// the action's verb, Other when neither says. prev is the id of the
// chain's record before r, "" when r is its first or that record is no
// longer kept (its hash is still r's prev_hash).
func (m Mapper) Event(r audit.Record, prev string) (Event, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return Event{}, err
	}
	var d struct {
		Method       string `json:"method"`
		Path         string `json:"path"`
		Code         string `json:"code"`
		Agent        string `json:"agent"`
		AgentVersion string `json:"agent_version"`
	}
	_ = json.Unmarshal(r.Details, &d)
	e := Event{
		Time:         r.Time.UnixMilli(),
		RawData:      string(raw),
		Message:      strings.TrimSpace(r.Action + " " + r.Outcome + " " + statusText(r.Status)),
		StatusDetail: d.Code,
		Metadata: Metadata{
			UID: r.ID, Version: m.ocsf(), TenantUID: r.Tenant, Sequence: r.Seq, CorrelationUID: r.TraceID,
			LogName: "audit", Product: Product{Name: "agentplane", VendorName: "agentplane", Version: m.Version},
		},
		Unmapped: Unmapped{Outcome: r.Outcome, WorkflowID: r.WorkflowID, TraceID: r.TraceID, Details: r.Details},
	}
	if m.ocsf() == OCSFVersion14 {
		e.Unmapped.Seq, e.Unmapped.Hash, e.Unmapped.PrevHash = r.Seq, r.Hash, r.PrevHash
	} else {
		e.Metadata.Profiles = []string{"record_integrity"}
		a := Attestation{UID: r.ID, AuthorityUID: "agentplane", ChainUID: ChainPrefix + r.Tenant, Fingerprint: sha256Fingerprint(r.Hash)}
		if prev != "" {
			a.PrevEvent = &PrevEvent{UID: prev, Fingerprint: sha256Fingerprint(r.PrevHash)}
		}
		e.AttestationList = []Attestation{a}
		if agent := cmp.Or(d.Agent, agentOf(r)); agent != "" {
			e.Metadata.Profiles = append(e.Metadata.Profiles, "ai_operation")
			e.AIAgent = &AIAgent{UID: agent, Name: agent, Version: d.AgentVersion, InstanceUID: r.WorkflowID}
		}
	}
	if r.Status != 0 {
		e.StatusCode = strconv.Itoa(r.Status)
		e.HTTPResponse = &HTTPResponse{Code: r.Status}
	}
	e.StatusID, e.Status = statusSuccess, "Success"
	e.SeverityID, e.Severity = severityInformational, "Informational"
	switch r.Outcome {
	case audit.Denied:
		e.StatusID, e.Status = statusFailure, "Failure"
		e.SeverityID, e.Severity = severityMedium, "Medium"
	case audit.Error:
		e.StatusID, e.Status = statusFailure, "Failure"
		e.SeverityID, e.Severity = severityLow, "Low"
	}
	if d.Method != "" {
		e.HTTPRequest = &HTTPRequest{HTTPMethod: d.Method}
		if d.Path != "" {
			e.HTTPRequest.URL = &URL{Path: d.Path}
		}
	}
	service := &Service{Name: "agentplane"}
	if r.Action == "oauth.token" {
		e.ClassUID, e.ClassName, e.CategoryUID, e.CategoryName = ClassAuthentication, "Authentication", CategoryIAM, "Identity & Access Management"
		e.ActivityID, e.ActivityName = authActivityLogon, "Logon"
		e.AuthProtocolID, e.AuthProtocol = authProtocolOAuth2, "OAUTH 2.0"
		client := cmp.Or(r.Actor.ClientID, r.Resource.ID)
		e.User = &User{UID: client, Name: client}
		if client == "" {
			e.User = &User{Name: "unknown"}
		}
		e.Service = service
		e.SrcEndpoint = requestSource(r)
	} else {
		e.ClassUID, e.ClassName, e.CategoryUID, e.CategoryName = ClassAPIActivity, "API Activity", CategoryApplication, "Application Activity"
		e.ActivityID, e.ActivityName = apiActivity(d.Method, r.Action)
		e.Actor = actorOf(r.Actor)
		e.API = &API{Operation: r.Action, Service: service}
		if r.RequestID != "" {
			e.API.Request = &Request{UID: r.RequestID}
		}
		if r.Resource.ID != "" {
			e.Resources = []Resource{{Type: r.Resource.Type, UID: r.Resource.ID}}
		} else if r.Resource.Type != "" {
			e.Resources = []Resource{{Type: r.Resource.Type, Name: r.Resource.Type}}
		}
		e.SrcEndpoint = requestSource(r)
	}
	e.TypeUID = int64(e.ClassUID)*100 + int64(e.ActivityID)
	e.TypeName = e.ClassName + ": " + e.ActivityName
	return e, nil
}

// apiActivity is the API Activity activity of a request's method, or of a
// workflow record's action verb.
func apiActivity(method, action string) (int, string) {
	switch method {
	case http.MethodPost:
		return 1, "Create"
	case http.MethodGet, http.MethodHead:
		return 2, "Read"
	case http.MethodPut, http.MethodPatch:
		return 3, "Update"
	case http.MethodDelete:
		return 4, "Delete"
	}
	if method == "" {
		_, verb, _ := strings.Cut(action, ".")
		switch verb {
		case "create", "deploy":
			return 1, "Create"
		case "read", "list", "query", "verify":
			return 2, "Read"
		case "update":
			return 3, "Update"
		case "delete":
			return 4, "Delete"
		}
	}
	return activityOther, "Other"
}

// actorOf is the OCSF actor of a record: its subject as the user (or the
// client, for a token without one) and its client as the app. A request
// without a valid token has the anonymous user.
func actorOf(a audit.Actor) *Actor {
	switch {
	case a.Sub != "":
		return &Actor{User: &User{UID: a.Sub, Name: a.Sub}, AppUID: a.ClientID}
	case a.ClientID != "":
		return &Actor{User: &User{UID: a.ClientID, Name: a.ClientID}, AppUID: a.ClientID}
	}
	return &Actor{User: &User{Name: "anonymous"}}
}

// requestSource is where an activity came from: a caller of the API (the
// audit record keeps no address, so the endpoint is named only) or, for a
// record a workflow wrote, agentplane's workflow runner.
func requestSource(r audit.Record) *Endpoint {
	if r.WorkflowID != "" && r.Action != "agent.invoke" {
		return &Endpoint{Name: "workflow", SvcName: "agentplane"}
	}
	return &Endpoint{Name: "api-client"}
}

// agentOf is the agent an invoke acts on (its resource), else "".
func agentOf(r audit.Record) string {
	if r.Action == "agent.invoke" && r.Resource.Type == "agent" {
		return r.Resource.ID
	}
	return ""
}

func statusText(status int) string {
	if status == 0 {
		return ""
	}
	return strconv.Itoa(status)
}
