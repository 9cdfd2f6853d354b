// An ASP.NET Web API controller (System.Web.Http, as Mono ships it), hosted by System.Web: the
// route is registered in Global.asax (Application_Start).
using System.Collections.Generic;
using System.Net;
using System.Net.Http;
using System.Runtime.Serialization;
using System.Web.Http;

[DataContract]
public class Item
{
    [DataMember(Name = "name")] public string Name { get; set; }
    [DataMember(Name = "count")] public int Count { get; set; }
}

public class ItemsController : ApiController
{
    public IEnumerable<Item> Get()
    {
        return new[] { new Item { Name = "kettle", Count = 2 }, new Item { Name = "cup", Count = 6 } };
    }

    public Item Get(int id)
    {
        if (id <= 0) throw new HttpResponseException(new HttpResponseMessage(HttpStatusCode.NotFound));
        return new Item { Name = "item " + id, Count = id };
    }

    public HttpResponseMessage Post([FromBody] Item item)
    {
        if (item == null || string.IsNullOrEmpty(item.Name))
            return Request.CreateResponse(HttpStatusCode.BadRequest, "name is required");
        item.Count += 1;
        return Request.CreateResponse(HttpStatusCode.Created, item);
    }
}

public static class WebApiConfig
{
    public static void Register(HttpConfiguration config)
    {
        config.Routes.MapHttpRoute("api", "api/{controller}/{id}", new { id = RouteParameter.Optional });
    }
}
