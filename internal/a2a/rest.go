package a2a

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/a2a/wire"
	"github.com/agentplane/agentplane/internal/frontdoor"
	"github.com/agentplane/agentplane/internal/problem"
)

// The HTTP+JSON binding: one route per method, answers as
// application/a2a+json, errors as problem documents that carry the
// binding's google.rpc.Status.

// MediaType is the media type of the HTTP+JSON binding's requests and
// answers and of push notifications (A2A 1.0.1, sections 11.1 and 14.1).
// Requests may also be sent as application/json.
const MediaType = "application/a2a+json"

// writeREST writes an HTTP+JSON answer.
func writeREST(w http.ResponseWriter, v any) error {
	b, err := frontdoor.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", MediaType)
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// SendMessage serves POST message:send.
func (s *Server) SendMessage(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, s.sendREST(false))
}

// SendStreamingMessage serves POST message:stream.
func (s *Server) SendStreamingMessage(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, s.sendREST(true))
}

// Task serves tasks/{id} (GetTask), tasks/{id}:cancel (CancelTask, POST)
// and tasks/{id}:subscribe (SubscribeToTask, POST or GET).
func (s *Server) Task(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, s.taskREST)
}

// ListTasks serves GET tasks.
func (s *Server) ListTasks(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, s.listTasksREST)
}

// PushConfigs serves the push-notification configs of a task.
func (s *Server) PushConfigs(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, s.pushConfigsREST)
}

// ExtendedCard answers GET extendedAgentCard: this agent has none, once
// the agent is known.
func (s *Server) ExtendedCard(w http.ResponseWriter, r *http.Request) error {
	return answerREST(w, r, func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.restCall(w, r)
		if err != nil {
			return err
		}
		_, err = c.traced("GetExtendedAgentCard", nil, func() (any, error) { return nil, errNoExtendedCard })
		return err
	})
}

// restCall is the call of an HTTP+JSON request, its agent checked.
func (s *Server) restCall(w http.ResponseWriter, r *http.Request) (*call, error) {
	v, err := s.agent(r)
	if err != nil {
		return nil, err
	}
	return &call{s: s, w: w, r: r, agent: v.Name, version: v.Version, description: v.Description, event: func(v any) any { return v }}, nil
}

func (s *Server) sendREST(stream bool) frontdoor.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.restCall(w, r)
		if err != nil {
			return err
		}
		var req wire.SendMessageRequest
		if err := frontdoor.DecodeJSON(r, &req); err != nil {
			return err
		}
		if stream {
			_, err := c.traced("SendStreamingMessage", sendAttrs(req), func() (any, error) { return nil, c.sendStreamingMessage(req) })
			return err
		}
		res, err := c.traced("SendMessage", sendAttrs(req), func() (any, error) { return c.sendMessage(req) })
		if err != nil {
			return err
		}
		return writeREST(w, res)
	}
}

// taskVerb splits the {task} segment "id:verb".
func taskVerb(seg string) (id, verb string) {
	id, verb, _ = strings.Cut(seg, ":")
	return id, verb
}

func (s *Server) taskREST(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	id, verb := taskVerb(r.PathValue("task"))
	var res any
	attrs := taskRequestAttrs("", id)
	switch {
	case verb == "subscribe":
		_, err := c.traced("SubscribeToTask", attrs, func() (any, error) { return nil, c.subscribe(id) })
		return err
	case verb == "" && r.Method == http.MethodGet:
		res, err = c.traced("GetTask", attrs, func() (any, error) { return c.getTask(id) })
	case verb == "cancel" && r.Method == http.MethodPost:
		res, err = c.traced("CancelTask", attrs, func() (any, error) { return c.cancelTask(id) })
	default:
		return problem.New(problem.NotFound, "no task method %q for %s: GET tasks/{id}, POST tasks/{id}:cancel, tasks/{id}:subscribe", verb, r.Method)
	}
	if err != nil {
		return err
	}
	return writeREST(w, res)
}

func (s *Server) listTasksREST(w http.ResponseWriter, r *http.Request) error {
	c, err := s.restCall(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	req := wire.ListTasksRequest{ContextID: q.Get("contextId"), Status: wire.TaskState(q.Get("status")), PageToken: q.Get("pageToken"),
		StatusTimestampAfter: q.Get("statusTimestampAfter")}
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return problem.Field("pageSize", "must be an integer")
		}
		n32 := int32(n)
		req.PageSize = &n32
	}
	if v := q.Get("includeArtifacts"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return problem.Field("includeArtifacts", "must be true or false")
		}
		req.IncludeArtifacts = &b
	}
	res, err := c.traced("ListTasks", nil, func() (any, error) { return c.listTasks(req) })
	if err != nil {
		return err
	}
	return writeREST(w, res)
}
